// Named memory regions of a node in a shared memory object that outlives workers (see regions.h).
#include "engine/regions.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

namespace xcargo::loader {

// The memory object's layout: this table, then from kDataStart the regions, each at a
// page-aligned offset. An entry counts once its state is kCommitted, stored last: a worker
// that dies while creating a region leaves a free entry. Only processes of one loader read
// it, so it is in host byte order; it is still checked like untrusted bytes when adopted, since
// a kernel in the worker that wrote it could have written anything.
struct Table {
  static constexpr uint64_t kMagic = 0x314d454e4f435858;  // "XXCONEM1"
  static constexpr uint32_t kCommitted = 0x52474e31;
  struct Entry {
    std::atomic<uint32_t> state;
    uint32_t name_length;
    char name[64];
    uint64_t offset, length;
  };
  uint64_t magic;
  uint64_t max_total;
  Entry entries[kMaxRegions];
};

namespace {

constexpr uint64_t kDataStart = 64 << 10;  // past the table, and aligned for 64 KiB pages
static_assert(sizeof(Table) <= kDataStart);

uint64_t page() { return uint64_t(::sysconf(_SC_PAGESIZE)); }
uint64_t round_up(uint64_t n, uint64_t to) { return (n + to - 1) / to * to; }
// Every region may waste up to a page to alignment.
uint64_t object_size(uint64_t max_total) { return kDataStart + max_total + kMaxRegions * page(); }

bool valid_name(std::string_view s) {
  return !s.empty() && s.size() <= 64 && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
  });
}

Error sys(const std::string& what) { return Error(Errc::io, "node memory: " + what + ": " + std::strerror(errno)); }

}  // namespace

Result<int> Regions::create_memory(uint64_t max_total_bytes) {
  if (max_total_bytes > (1ull << 46)) return Error(Errc::invalid_argument, "node memory: over 2^46 bytes of regions");
  const int fd = ::memfd_create("xcargo-node-memory", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return sys("memfd_create");
  // Sealed at its size: nobody holding it (a kernel in a worker) can shrink it under the
  // mappings of the next worker, which would fault on touching them.
  if (::ftruncate(fd, off_t(object_size(max_total_bytes))) != 0 ||
      ::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    Error e = sys("sizing and sealing the memory object");
    ::close(fd);
    return e;
  }
  void* t = ::mmap(nullptr, sizeof(Table), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (t == MAP_FAILED) {
    Error e = sys("mapping the region table");
    ::close(fd);
    return e;
  }
  static_cast<Table*>(t)->magic = Table::kMagic;
  static_cast<Table*>(t)->max_total = max_total_bytes;
  ::munmap(t, sizeof(Table));
  return fd;
}

Result<std::unique_ptr<Regions>> Regions::open(uint64_t max_total_bytes, int memory_fd,
                                               const std::vector<std::pair<std::string, uint64_t>>& configured) {
  std::unique_ptr<Regions> r(new Regions());
  r->max_total_ = max_total_bytes;
  r->size_ = object_size(max_total_bytes);
  if (memory_fd < 0) {
    auto fd = create_memory(max_total_bytes);
    XC_TRY(fd);
    memory_fd = *fd;
    r->own_fd_ = true;
  }
  r->fd_ = memory_fd;
  struct stat st {};
  if (::fstat(memory_fd, &st) != 0 || uint64_t(st.st_size) != r->size_)
    return Error(Errc::invalid_argument, "node memory: the memory object does not have the size of a " +
                                     std::to_string(max_total_bytes) + "-byte limit");
  void* t = ::mmap(nullptr, sizeof(Table), PROT_READ | PROT_WRITE, MAP_SHARED, memory_fd, 0);
  if (t == MAP_FAILED) return sys("mapping the region table");
  r->table_ = static_cast<Table*>(t);
  Table& table = *r->table_;
  table.magic = Table::kMagic;  // a kernel may have written over it: what it says is checked below
  table.max_total = max_total_bytes;
  // Adopt what an earlier worker left, entry by entry, refusing whatever does not describe a
  // region of its own inside the object: the configured regions first, then the others while
  // room remains for the configured ones still missing.
  std::map<std::string, uint64_t, std::less<>> wanted(configured.begin(), configured.end());
  auto missing = [&](uint64_t* bytes) {
    size_t n = 0;
    *bytes = 0;
    for (const auto& [name, len] : wanted)
      if (!r->regions_.count(name)) ++n, *bytes += len;
    return n;
  };
  std::vector<std::pair<uint64_t, uint64_t>> taken;  // [offset, end) of adopted regions
  for (int pass = 0; pass < 2; ++pass)
    for (Table::Entry& e : table.entries) {
      if (e.state.load(std::memory_order_acquire) != Table::kCommitted) {
        e.state.store(0);
        continue;
      }
      const uint64_t off = e.offset, len = e.length;
      const std::string name(e.name, std::min<size_t>(e.name_length, sizeof e.name));
      const auto w = wanted.find(name);
      if ((pass == 0) != (w != wanted.end())) continue;  // configured names in the first pass
      uint64_t reserve = 0;
      const size_t places = pass == 1 ? missing(&reserve) : 0;
      const bool fits = e.name_length <= sizeof e.name && valid_name(name) && len > 0 && off >= kDataStart &&
                        off % page() == 0 && len <= r->size_ && off <= r->size_ - round_up(len, page()) &&
                        (w == wanted.end() || w->second == len) && reserve <= max_total_bytes - r->total_ &&
                        len <= max_total_bytes - r->total_ - reserve && r->regions_.size() + places < kMaxRegions &&
                        !r->regions_.count(name) &&
                        std::none_of(taken.begin(), taken.end(), [&](const auto& t) { return off < t.second && t.first < off + len; });
      if (!fits || !r->map(name, off, len).ok()) {
        e.state.store(0);
        ++r->dropped_;
        continue;
      }
      taken.emplace_back(off, off + round_up(len, page()));
      ++r->adopted_;
    }
  return r;
}

Regions::~Regions() {
  for (auto& [name, r] : regions_) ::munmap(r->base, r->length);
  if (table_) ::munmap(table_, sizeof(Table));
  if (own_fd_) ::close(fd_);
}

// Maps [offset, offset+length) of the object as region `name` (length within total_).
Result<Region*> Regions::map(std::string name, uint64_t offset, uint64_t length) {
  void* p = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd_, off_t(offset));
  if (p == MAP_FAILED) return Error(Errc::limit, "region '" + name + "': cannot be mapped: " + std::strerror(errno));
  auto r = std::make_unique<Region>();
  r->name = std::move(name);
  r->base = static_cast<uint8_t*>(p);
  r->length = length;
  r->offset = offset;
  total_ += length;
  return (regions_[r->name] = std::move(r)).get();
}

Result<Region*> Regions::create(std::string_view name, uint64_t length) {
  if (!valid_name(name))
    return Error(Errc::invalid_argument, "region name '" + std::string(name.substr(0, 64)) + "' is not 1 to 64 of A-Z a-z 0-9 _ . -");
  if (length == 0) return Error(Errc::invalid_argument, "region '" + std::string(name) + "': its size must not be 0");
  std::lock_guard<std::mutex> l(mu_);
  if (auto it = regions_.find(name); it != regions_.end()) {
    if (it->second->length == length) return it->second.get();
    return Error(Errc::invalid_argument, "region '" + std::string(name) + "' exists with " +
                                             std::to_string(it->second->length) + " bytes, not " + std::to_string(length));
  }
  if (regions_.size() >= kMaxRegions) return Error(Errc::limit, "this node already has " + std::to_string(kMaxRegions) + " regions");
  if (length > max_total_ - total_)
    return Error(Errc::limit, "region '" + std::string(name) + "' of " + std::to_string(length) +
                                  " bytes would take this node's regions past their limit of " + std::to_string(max_total_));
  uint64_t offset = kDataStart;  // after every region (the table holds no others: open dropped them)
  for (const auto& [n, r] : regions_) offset = std::max(offset, r->offset + round_up(r->length, page()));
  Table::Entry* free = nullptr;
  for (Table::Entry& t : table_->entries)
    if (t.state.load(std::memory_order_relaxed) != Table::kCommitted) {
      free = &t;
      break;
    }
  if (!free || offset + round_up(length, page()) > size_) return Error(Errc::limit, "region '" + std::string(name) + "': no room left in node memory");
  // Zero, whatever a kernel may have written there through a mapping of its own.
  if (::fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off_t(offset), off_t(round_up(length, page()))) != 0)
    return sys("clearing region '" + std::string(name) + "'");
  auto r = map(std::string(name), offset, length);
  XC_TRY(r);
  free->name_length = uint32_t(name.size());
  std::memset(free->name, 0, sizeof free->name);
  std::memcpy(free->name, name.data(), name.size());
  free->offset = offset;
  free->length = length;
  free->state.store(Table::kCommitted, std::memory_order_release);
  return *r;
}

Region* Regions::find(std::string_view name) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = regions_.find(name);
  return it == regions_.end() ? nullptr : it->second.get();
}

std::vector<std::pair<std::string, uint64_t>> Regions::list() const {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<std::pair<std::string, uint64_t>> out;
  for (const auto& [name, r] : regions_) out.emplace_back(name, r->length);
  return out;
}

}  // namespace xcargo::loader
