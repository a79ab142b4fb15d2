// Kept cargos in a shared memory object that outlives workers (see cargo_store.h).
#include "engine/cargo_store.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>

namespace xcargo::loader {

// The object's layout: kSlots entries from offset 0, then slot i's bytes at
// kDataStart + i * slot size. Read and written with pread/pwrite, never mapped (the worker's
// address space stays its own). An entry counts once its state is kKept, written last.
struct CargoStore::Entry {
  static constexpr uint32_t kKept = 0x4f475243;  // "CRGO"
  uint32_t state;
  uint32_t reserved;
  uint64_t length;
  uint64_t sequence;  // higher: kept later
  uint8_t digest[32];
};

namespace {

constexpr uint64_t kDataStart = 64 << 10;
static_assert(CargoStore::kSlots * 56 <= kDataStart);  // 56: sizeof(Entry)

uint64_t slot_size(uint64_t max_cargo) { return (max_cargo + 4095) / 4096 * 4096; }

Error sys(const std::string& what) { return Error(Errc::io, "kept cargos: " + what + ": " + std::strerror(errno)); }

bool pread_all(int fd, void* to, size_t n, uint64_t at) {
  auto* p = static_cast<uint8_t*>(to);
  while (n > 0) {
    const ssize_t r = ::pread(fd, p, n, off_t(at));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r, n -= size_t(r), at += uint64_t(r);
  }
  return true;
}

bool pwrite_all(int fd, const void* from, size_t n, uint64_t at) {
  auto* p = static_cast<const uint8_t*>(from);
  while (n > 0) {
    const ssize_t r = ::pwrite(fd, p, n, off_t(at));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r, n -= size_t(r), at += uint64_t(r);
  }
  return true;
}

std::mutex g_keep_mu;  // one keep() at a time in this process

}  // namespace

Result<int> CargoStore::create_memory(uint64_t max_cargo) {
  if (max_cargo == 0 || max_cargo > (1ull << 40)) return Error(Errc::invalid_argument, "kept cargos: a cargo limit of 1 byte to 1 TiB");
  const int fd = ::memfd_create("xcargo-kept-cargos", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return sys("memfd_create");
  if (::ftruncate(fd, off_t(kDataStart + kSlots * slot_size(max_cargo))) != 0 ||
      ::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    Error e = sys("sizing and sealing the memory object");
    ::close(fd);
    return e;
  }
  return fd;
}

Result<std::unique_ptr<CargoStore>> CargoStore::open(int fd, uint64_t max_cargo) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return sys("fstat");
  if (uint64_t(st.st_size) != kDataStart + kSlots * slot_size(max_cargo))
    return Error(Errc::invalid_argument, "kept cargos: the memory object has " + std::to_string(st.st_size) +
                                             " bytes, not the size for cargos of " + std::to_string(max_cargo) + " bytes");
  std::unique_ptr<CargoStore> s(new CargoStore());
  s->fd_ = fd;
  s->slot_size_ = slot_size(max_cargo);
  return s;
}

std::vector<CargoStore::Entry> CargoStore::table() const {
  std::vector<Entry> t(kSlots);
  if (!pread_all(fd_, t.data(), kSlots * sizeof(Entry), 0)) t.assign(kSlots, Entry{});
  for (Entry& e : t)  // what a kernel may have written: anything that cannot be a cargo is no entry
    if (e.state != Entry::kKept || e.length == 0 || e.length > slot_size_ || e.length > kMaxBytes) e.state = 0;
  // The latest within kMaxBytes together (keep() holds to it; a kernel need not).
  std::vector<size_t> order(t.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return t[a].sequence > t[b].sequence; });
  uint64_t total = 0;
  for (size_t i : order) {
    if (t[i].state != Entry::kKept) continue;
    if (t[i].length > kMaxBytes - total) t[i].state = 0;
    else total += t[i].length;
  }
  return t;
}

std::optional<Bytes> CargoStore::read(const Entry& e, size_t slot) const {
  Bytes b(e.length);  // at most the slot size, checked in table()
  if (!pread_all(fd_, b.data(), b.size(), kDataStart + slot * slot_size_)) return std::nullopt;
  return b;
}

std::optional<Bytes> CargoStore::find(const Digest& digest) const {
  const std::vector<Entry> t = table();
  for (size_t i = 0; i < t.size(); ++i)
    if (t[i].state == Entry::kKept && std::memcmp(t[i].digest, digest.data(), 32) == 0) return read(t[i], i);
  return std::nullopt;
}

bool CargoStore::contains(const Digest& digest) const {
  for (const Entry& e : table())
    if (e.state == Entry::kKept && std::memcmp(e.digest, digest.data(), 32) == 0) return true;
  return false;
}

std::vector<Digest> CargoStore::digests() const {
  const std::vector<Entry> t = table();
  std::vector<size_t> kept;
  for (size_t i = 0; i < t.size(); ++i)
    if (t[i].state == Entry::kKept) kept.push_back(i);
  std::stable_sort(kept.begin(), kept.end(), [&](size_t a, size_t b) { return t[a].sequence > t[b].sequence; });
  std::vector<Digest> out;
  for (size_t i : kept) {
    Digest d;
    std::memcpy(d.data(), t[i].digest, 32);
    out.push_back(d);
  }
  return out;
}

Status CargoStore::keep(const Digest& digest, ByteView cargo) {
  if (cargo.empty() || cargo.size() > slot_size_ || cargo.size() > kMaxBytes)
    return Error(Errc::limit, "kept cargos: a cargo of " + std::to_string(cargo.size()) + " bytes does not fit");
  std::lock_guard<std::mutex> l(g_keep_mu);
  std::vector<Entry> t = table();
  uint64_t used = 0, sequence = 0;
  for (const Entry& e : t) {
    if (e.state != Entry::kKept) continue;
    if (std::memcmp(e.digest, digest.data(), 32) == 0) return {};
    used += e.length;
    sequence = std::max(sequence, e.sequence);
  }
  // A free slot, or the oldest; then the oldest others until the bytes fit.
  auto oldest = [&]() -> size_t {
    size_t at = kSlots;
    for (size_t i = 0; i < kSlots; ++i)
      if (t[i].state == Entry::kKept && (at == kSlots || t[i].sequence < t[at].sequence)) at = i;
    return at;
  };
  auto drop = [&](size_t i) -> Status {
    t[i].state = 0;
    used -= t[i].length;
    if (!pwrite_all(fd_, &t[i], sizeof(Entry), i * sizeof(Entry))) return sys("pwrite");
    // Its memory back (the object is sparse): zeroed pages take none.
    (void)::fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off_t(kDataStart + i * slot_size_), off_t(slot_size_));
    return {};
  };
  size_t slot = kSlots;
  for (size_t i = 0; i < kSlots && slot == kSlots; ++i)
    if (t[i].state != Entry::kKept) slot = i;
  if (slot == kSlots) {
    slot = oldest();
    XC_TRY(drop(slot));
  }
  while (used + cargo.size() > kMaxBytes) XC_TRY(drop(oldest()));
  Entry e{};
  e.length = cargo.size();
  e.sequence = sequence + 1;
  std::memcpy(e.digest, digest.data(), 32);
  if (!pwrite_all(fd_, cargo.data(), cargo.size(), kDataStart + slot * slot_size_) ||
      !pwrite_all(fd_, &e, sizeof e, slot * sizeof(Entry)))
    return sys("pwrite");
  e.state = Entry::kKept;  // last: a worker that dies before this leaves no entry
  if (!pwrite_all(fd_, &e.state, sizeof e.state, slot * sizeof(Entry))) return sys("pwrite");
  return {};
}

}  // namespace xcargo::loader
