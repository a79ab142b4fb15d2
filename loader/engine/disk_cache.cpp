// Disk cache entries: "XCJC" magic, u32 version 1, u64 size, SHA-256 of the object, object.
#include "disk_cache.h"

#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>

#include "xcargo/file.h"

namespace xcargo::loader {

namespace {
constexpr uint8_t kMagic[4] = {'X', 'C', 'J', 'C'};
constexpr size_t kHeader = 4 + 4 + 8 + 32;
constexpr uint64_t kMaxEntry = 256ull * 1024 * 1024;
}  // namespace

Result<DiskCache> DiskCache::open(const std::string& dir) {
  DiskCache c;
  if (dir.empty()) return c;
  std::error_code ec;
  std::filesystem::create_directories(dir + "/jit", ec);
  if (ec) return Error(Errc::io, dir + ": cannot create the cache directory: " + ec.message());
  if (::access((dir + "/jit").c_str(), W_OK) != 0) return Error(Errc::io, dir + ": cache directory is not writable");
  // Writes cut short (a loader killed mid-write) leave temporary files; never entries. A
  // minute-old one has no writer left, even with loaders sharing the directory.
  const auto stale = std::filesystem::file_time_type::clock::now() - std::chrono::minutes(1);
  for (const auto& e : std::filesystem::directory_iterator(dir + "/jit", ec))
    if (e.path().filename().string().find(".tmp-") != std::string::npos && e.last_write_time(ec) < stale)
      std::filesystem::remove(e.path(), ec);
  c.dir_ = dir;
  return c;
}

std::string DiskCache::path_of(const std::string& key) const { return dir_ + "/jit/" + key + ".o"; }

std::optional<Bytes> DiskCache::get(const std::string& key, bool* corrupt) const {
  if (corrupt) *corrupt = false;
  if (!enabled()) return std::nullopt;
  const std::string path = path_of(key);
  if (::access(path.c_str(), F_OK) != 0) return std::nullopt;
  auto data = read_file(path, kMaxEntry + kHeader);
  bool ok = data.ok() && data->size() >= kHeader && std::memcmp(data->data(), kMagic, 4) == 0 &&
            data->at(4) == 1 && data->at(5) == 0 && data->at(6) == 0 && data->at(7) == 0;
  if (ok) {
    uint64_t size = 0;
    std::memcpy(&size, data->data() + 8, 8);  // little-endian hosts only (x86-64, aarch64, riscv64)
    ok = size == data->size() - kHeader;
    if (ok) {
      ByteView obj = ByteView(*data).subspan(kHeader);
      ok = std::memcmp(sha256(obj).data(), data->data() + 16, 32) == 0;
      if (ok) return Bytes(obj.begin(), obj.end());
    }
  }
  if (corrupt) *corrupt = true;
  ::unlink(path.c_str());
  return std::nullopt;
}

Status DiskCache::put(const std::string& key, ByteView object) const {
  if (!enabled()) return {};
  Bytes entry(kHeader + object.size());
  std::memcpy(entry.data(), kMagic, 4);
  const uint32_t version = 1;
  const uint64_t size = object.size();
  std::memcpy(entry.data() + 4, &version, 4);
  std::memcpy(entry.data() + 8, &size, 8);
  Digest d = sha256(object);
  std::memcpy(entry.data() + 16, d.data(), 32);
  std::memcpy(entry.data() + kHeader, object.data(), object.size());
  return write_file(path_of(key), entry, 0644);
}

}  // namespace xcargo::loader
