// NodeStats: counters in a memory object that outlives workers (see node_stats.h).
#include "stats/node_stats.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>

namespace xcargo::loader {

namespace {

constexpr unsigned kShards = NodeStats::kOwnedShards + 1;  // per bank: the last is shared (locked adds)
// A shard's cells: invocations, one per status, bytes in and out, kernels started and ended
// (these two only in the total's shards).
enum : size_t { kInvocations = 0, kStatus0 = 1, kBytesIn = kStatus0 + kStatusKinds, kBytesOut, kStarted, kEnded, kCells = 32 };
static_assert(kEnded < kCells, "a counter past the cells of a thread's slot");
constexpr size_t kLabels = 1 + 2 * (kMaxLabelValues + 1);  // the total, then cargos, then clients (each with "other")
constexpr uint32_t kCommitted = 0x4c424c31;  // a label slot's value is written

struct alignas(64) Shard {
  std::atomic<uint64_t> c[kCells];
};
struct LabelSlot {
  std::atomic<uint32_t> state;  // 0 free, 1 being written, kCommitted
  char value[kLabelBytes];
};

size_t row(LabelKind kind, uint16_t slot) {
  return 1 + size_t(kind) * (kMaxLabelValues + 1) + (slot > kOtherLabel ? kOtherLabel : slot);
}

// This thread's number among the threads of this process that counted (never reused).
unsigned thread_index() {
  static std::atomic<unsigned> next{0};
  thread_local const unsigned mine = next.fetch_add(1, std::memory_order_relaxed);
  return mine;
}

}  // namespace

// Host byte order: only processes of one loader map it.
struct NodeStats::Layout {
  static constexpr uint64_t kMagic = 0x3154415453435858;  // "XXCSTAT1"
  uint64_t magic;
  int64_t started_unix_ns;
  std::atomic<uint64_t> worker_restarts;
  std::atomic<uint64_t> next_bank;
  std::atomic<int32_t> bank_pid[kBanks];  // the worker counting in each bank (0: none yet)
  LabelSlot labels[2][kMaxLabelValues];
  Shard shards[kLabels][kBanks * kShards];
};

Counts& Counts::operator+=(const Counts& o) {
  invocations += o.invocations;
  for (size_t i = 0; i < kStatusKinds; ++i) by_status[i] += o.by_status[i];
  bytes_in += o.bytes_in;
  bytes_out += o.bytes_out;
  return *this;
}

Result<int> NodeStats::create_memory() {
  const int fd = ::memfd_create("xcargo-node-stats", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return Error(Errc::io, std::string("node statistics: memfd_create: ") + std::strerror(errno));
  // Sealed at its size: no worker (nor a kernel in one) can shrink it under the others' mappings.
  if (::ftruncate(fd, off_t(sizeof(Layout))) != 0 || ::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    Error e(Errc::io, std::string("node statistics: sizing the memory object: ") + std::strerror(errno));
    ::close(fd);
    return e;
  }
  void* p = ::mmap(nullptr, sizeof(Layout), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    Error e(Errc::io, std::string("node statistics: mapping: ") + std::strerror(errno));
    ::close(fd);
    return e;
  }
  auto* m = static_cast<Layout*>(p);  // zero-filled by ftruncate
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  m->started_unix_ns = int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
  m->magic = Layout::kMagic;
  ::munmap(p, sizeof(Layout));
  return fd;
}

Result<std::unique_ptr<NodeStats>> NodeStats::open(int fd, bool writable) {
  struct stat st {};
  if (::fstat(fd, &st) != 0 || uint64_t(st.st_size) != sizeof(Layout))
    return Error(Errc::invalid_argument, "node statistics: the memory object does not have the statistics' size");
  void* p = ::mmap(nullptr, sizeof(Layout), writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return Error(Errc::io, std::string("node statistics: mapping: ") + std::strerror(errno));
  std::unique_ptr<NodeStats> s(new NodeStats);
  s->m_ = static_cast<Layout*>(p);
  s->writable_ = writable;
  if (s->m_->magic != Layout::kMagic) return Error(Errc::malformed, "node statistics: the memory object has no statistics' stamp");
  return s;
}

NodeStats::~NodeStats() {
  if (m_) ::munmap(m_, sizeof(Layout));
}

void NodeStats::begin_serving() {
  bank_ = unsigned(m_->next_bank.fetch_add(1, std::memory_order_relaxed) % kBanks);
  // The kernels the bank's previous worker left running ended with it.
  for (unsigned s = 0; s < kShards; ++s) {
    m_->shards[0][bank_ * kShards + s].c[kStarted].store(0, std::memory_order_relaxed);
    m_->shards[0][bank_ * kShards + s].c[kEnded].store(0, std::memory_order_relaxed);
  }
  m_->bank_pid[bank_].store(int32_t(::getpid()), std::memory_order_relaxed);
}

uint16_t NodeStats::label(LabelKind kind, std::string_view value) {
  if (value.size() >= kLabelBytes) value = value.substr(0, kLabelBytes - 1);
  LabelSlot* slots = m_->labels[size_t(kind)];
  for (uint16_t i = 0; i < kMaxLabelValues; ++i) {
    LabelSlot& l = slots[i];
    uint32_t state = l.state.load(std::memory_order_acquire);
    if (state == 0 && l.state.compare_exchange_strong(state, 1, std::memory_order_acquire)) {
      std::memcpy(l.value, value.data(), value.size());
      l.value[value.size()] = 0;
      l.state.store(kCommitted, std::memory_order_release);
      return i;
    }
    // A slot another thread is writing is passed: if it holds the same value, the two
    // slots are merged when read.
    if (state == kCommitted && ::strnlen(l.value, kLabelBytes) == value.size() && std::memcmp(l.value, value.data(), value.size()) == 0)
      return i;
  }
  return kOtherLabel;
}

namespace {
void add(Shard& s, size_t cell, uint64_t n, bool owned) {
  std::atomic<uint64_t>& c = s.c[cell];
  if (owned) c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);  // this thread's alone
  else c.fetch_add(n, std::memory_order_relaxed);
}
}  // namespace

void NodeStats::kernel_started() {
  const unsigned t = thread_index();
  const bool owned = t < kOwnedShards;
  add(m_->shards[0][bank_ * kShards + (owned ? t : kOwnedShards)], kStarted, 1, owned);
}

void NodeStats::kernel_ended() {
  const unsigned t = thread_index();
  const bool owned = t < kOwnedShards;
  add(m_->shards[0][bank_ * kShards + (owned ? t : kOwnedShards)], kEnded, 1, owned);
}

void NodeStats::answered(uint16_t cargo, uint16_t client, wire::ReplyStatus status, uint64_t bytes_in, uint64_t bytes_out) {
  const unsigned t = thread_index();
  const bool owned = t < kOwnedShards;
  const size_t shard = bank_ * kShards + (owned ? t : kOwnedShards);
  const size_t st = kStatus0 + (size_t(status) < kStatusKinds ? size_t(status) : size_t(wire::ReplyStatus::internal));
  for (size_t r : {size_t(0), row(LabelKind::cargo, cargo), row(LabelKind::client, client)}) {
    Shard& s = m_->shards[r][shard];
    add(s, kInvocations, 1, owned);
    add(s, st, 1, owned);
    if (bytes_in) add(s, kBytesIn, bytes_in, owned);
    if (bytes_out) add(s, kBytesOut, bytes_out, owned);
  }
}

void NodeStats::worker_restarted() { m_->worker_restarts.fetch_add(1, std::memory_order_relaxed); }

void NodeStats::worker_ended(pid_t pid) {
  for (auto& p : m_->bank_pid) {
    int32_t expected = int32_t(pid);
    p.compare_exchange_strong(expected, 0, std::memory_order_relaxed);
  }
}

StatsSnapshot NodeStats::snapshot() const {
  auto sum = [&](size_t r) {
    Counts c;
    for (const Shard& s : m_->shards[r]) {
      c.invocations += s.c[kInvocations].load(std::memory_order_relaxed);
      for (size_t i = 0; i < kStatusKinds; ++i) c.by_status[i] += s.c[kStatus0 + i].load(std::memory_order_relaxed);
      c.bytes_in += s.c[kBytesIn].load(std::memory_order_relaxed);
      c.bytes_out += s.c[kBytesOut].load(std::memory_order_relaxed);
    }
    return c;
  };
  StatsSnapshot out;
  out.started_unix_s = double(m_->started_unix_ns) / 1e9;
  out.worker_restarts = m_->worker_restarts.load(std::memory_order_relaxed);
  out.total = sum(0);
  for (unsigned b = 0; b < kBanks; ++b) {
    if (m_->bank_pid[b].load(std::memory_order_relaxed) <= 0) continue;  // reaped: its kernels ended with it
    uint64_t started = 0, ended = 0;
    for (unsigned s = 0; s < kShards; ++s) {
      started += m_->shards[0][b * kShards + s].c[kStarted].load(std::memory_order_relaxed);
      ended += m_->shards[0][b * kShards + s].c[kEnded].load(std::memory_order_relaxed);
    }
    if (started > ended && started - ended < (1u << 20)) out.running += started - ended;
  }
  for (LabelKind kind : {LabelKind::cargo, LabelKind::client}) {
    std::vector<LabelCounts>& list = kind == LabelKind::cargo ? out.cargos : out.clients;
    auto merge = [&](std::string value, const Counts& c) {
      if (c.invocations == 0 && c.bytes_in == 0) return;
      for (LabelCounts& l : list)
        if (l.value == value) {
          l.counts += c;
          return;
        }
      list.push_back({std::move(value), c});
    };
    for (uint16_t i = 0; i < kMaxLabelValues; ++i) {
      const LabelSlot& l = m_->labels[size_t(kind)][i];
      if (l.state.load(std::memory_order_acquire) != kCommitted) continue;
      merge(std::string(l.value, ::strnlen(l.value, kLabelBytes)), sum(row(kind, i)));
    }
    merge(kOtherLabelText, sum(row(kind, kOtherLabel)));
  }
  return out;
}

}  // namespace xcargo::loader
