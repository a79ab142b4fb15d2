// Disk cache entries (version 2): "XCJC" magic, u32 version, u64 object size, SHA-256 of the
// object, u32 signer count, u32 zero, the signers' key ids (8 bytes each), the object.
#include "engine/disk_cache.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "xcargo/file.h"
#include "xcargo/format.h"

namespace xcargo::loader {

namespace {
constexpr uint8_t kMagic[4] = {'X', 'C', 'J', 'C'};
constexpr uint32_t kVersion = 2;
constexpr size_t kFixed = 4 + 4 + 8 + 32 + 4 + 4;
constexpr uint32_t kMaxSigners = format::kMaxSignatures;
constexpr uint64_t kMaxEntry = 256ull * 1024 * 1024;

// An entry's signers and object, or nullopt if the bytes are not a whole, undamaged entry.
struct Parsed {
  std::vector<KeyId> signers;
  ByteView object;
};
std::optional<Parsed> parse(ByteView e) {
  if (e.size() < kFixed || std::memcmp(e.data(), kMagic, 4) != 0) return std::nullopt;
  uint32_t version = 0, count = 0, zero = 0;
  uint64_t size = 0;
  std::memcpy(&version, e.data() + 4, 4);  // little-endian hosts only (x86-64, aarch64, riscv64)
  std::memcpy(&size, e.data() + 8, 8);
  std::memcpy(&count, e.data() + 48, 4);
  std::memcpy(&zero, e.data() + 52, 4);
  if (version != kVersion || zero != 0 || count == 0 || count > kMaxSigners) return std::nullopt;
  const size_t head = kFixed + size_t(count) * format::kKeyIdSize;
  if (e.size() < head || size != e.size() - head) return std::nullopt;
  Parsed p;
  for (uint32_t i = 0; i < count; ++i) {
    KeyId id{};
    std::memcpy(id.data(), e.data() + kFixed + i * format::kKeyIdSize, format::kKeyIdSize);
    p.signers.push_back(id);
  }
  p.object = e.subspan(head);
  if (std::memcmp(sha256(p.object).data(), e.data() + 16, 32) != 0) return std::nullopt;
  return p;
}

bool is_entry(const std::filesystem::path& p) {
  return p.extension() == ".o" && p.filename().string().find(".tmp-") == std::string::npos;
}

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

DiskCache DiskCache::open_read_only(const std::string& dir) {
  DiskCache c;
  c.dir_ = dir;
  c.read_only_ = true;
  return c;
}

std::string DiskCache::path_of(const std::string& key) const { return dir_ + "/jit/" + key + ".o"; }

std::optional<Bytes> DiskCache::get(const std::string& key, bool* corrupt) const {
  if (corrupt) *corrupt = false;
  if (!enabled()) return std::nullopt;
  const std::string path = path_of(key);
  if (::access(path.c_str(), F_OK) != 0) return std::nullopt;
  auto data = read_file(path, kMaxEntry);
  if (data.ok())
    if (auto p = parse(*data)) return Bytes(p->object.begin(), p->object.end());
  if (corrupt) *corrupt = true;
  if (!read_only_) ::unlink(path.c_str());
  return std::nullopt;
}

bool DiskCache::has(const std::string& key) const { return enabled() && ::access(path_of(key).c_str(), F_OK) == 0; }

Status DiskCache::put(const std::string& key, ByteView object, const std::vector<KeyId>& signers) const {
  if (!enabled()) return {};
  if (read_only_) return Error(Errc::invalid_argument, dir_ + ": this process only reads the cache");
  if (signers.empty() || signers.size() > kMaxSigners) return Error(Errc::invalid_argument, "a cache entry needs 1 to 16 signers");
  const size_t head = kFixed + signers.size() * format::kKeyIdSize;
  if (object.size() > kMaxEntry - head) return Error(Errc::limit, "the object is larger than a cache entry may be");
  Bytes entry(head + object.size());
  std::memcpy(entry.data(), kMagic, 4);
  const uint64_t size = object.size();
  const uint32_t count = uint32_t(signers.size());
  std::memcpy(entry.data() + 4, &kVersion, 4);
  std::memcpy(entry.data() + 8, &size, 8);
  std::memcpy(entry.data() + 16, sha256(object).data(), 32);
  std::memcpy(entry.data() + 48, &count, 4);
  for (size_t i = 0; i < signers.size(); ++i) std::memcpy(entry.data() + kFixed + i * format::kKeyIdSize, signers[i].data(), format::kKeyIdSize);
  std::memcpy(entry.data() + head, object.data(), object.size());
  return write_file(path_of(key), entry, 0600);
}

size_t DiskCache::sweep(const TrustStore& trust) const {
  if (!enabled()) return 0;
  size_t removed = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir_ + "/jit", ec)) {
    if (!is_entry(e.path())) continue;
    auto data = read_file(e.path().string(), kMaxEntry);
    if (!data.ok()) continue;  // gone meanwhile, or unreadable: get() decides
    auto p = parse(*data);
    if (p && std::any_of(p->signers.begin(), p->signers.end(), [&](const KeyId& id) { return trust.find(id) != nullptr; }))
      continue;
    removed += ::unlink(e.path().c_str()) == 0;
  }
  return removed;
}

size_t DiskCache::remove_partial(int writer_pid) const {
  if (!enabled() || read_only_ || writer_pid <= 0) return 0;
  const std::string mark = ".tmp-" + std::to_string(writer_pid) + "-";
  size_t removed = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir_ + "/jit", ec))
    if (e.path().filename().string().find(mark) != std::string::npos) removed += std::filesystem::remove(e.path(), ec);
  return removed;
}

}  // namespace xcargo::loader
