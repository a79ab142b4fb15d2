// Shared-memory lanes (format-spec/wire-protocol.md section 8): the layout of a lane's
// segment and the ring operations both ends use. A lane carries one connection's small
// requests and replies through a segment the loader's worker made for that connection, when
// client and node share a host: the sender writes a slot and the receiver, polling, sees it,
// with no system call and no UCX progress on the way.
//
// Neither end trusts the other's writes: a reader copies a slot out before it decodes it and
// checks its lengths against the slot, and a writer reads the other end's counter only to
// decide whether a slot is free (a lying reader loses its own messages, nothing else).
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>

#include "xcargo/types.h"
#include "wire/wire.h"

namespace xcargo::wire::lane {

inline constexpr uint8_t kMagic[4] = {'X', 'C', 'L', 'N'};
inline constexpr uint32_t kLayoutVersion = 1;
inline constexpr uint32_t kSlots = 128;        // per ring: a client's 64 requests in flight fit
inline constexpr uint32_t kSlotSize = 2048;
inline constexpr size_t kSlotHeader = 24;      // seq u64, type u16, 0 u16, header_len u32, data_len u32, 0 u32
inline constexpr size_t kCapacity = kSlotSize - kSlotHeader;  // header + data bytes a slot holds
inline constexpr size_t kControlSize = 4096;
inline constexpr uint64_t kPrefetchAhead = 2;  // slots a reader prefetches past the one it read
inline constexpr size_t kSegmentSize = kControlSize + 2 * size_t(kSlots) * kSlotSize;
using LaneNonce = std::array<uint8_t, 16>;

// The control page. Each counter or flag written by one end has a cache line of its own.
inline constexpr size_t kOffMagic = 0, kOffVersion = 4, kOffNonce = 8, kOffSlots = 24, kOffSlotSize = 28;
inline constexpr size_t kOffWorkerIdle = 64;      // u32, worker: 1 while it may sleep (a kick wakes it)
inline constexpr size_t kOffRequestsTaken = 128;  // u64, worker: requests copied out so far
inline constexpr size_t kOffClientIdle = 192;     // u32, client: 1 while it may sleep
inline constexpr size_t kOffRepliesTaken = 256;   // u64, client: replies copied out so far
inline constexpr size_t kOffWorkerEnded = 320;    // u32, worker: 1 once it reads no more requests (8.4)
inline constexpr size_t kOffRequests = kControlSize;
inline constexpr size_t kOffReplies = kControlSize + size_t(kSlots) * kSlotSize;

inline bool fits(ByteView header, ByteView data) { return header.size() + data.size() <= kCapacity; }

// One direction of a lane: message i goes to slot i % kSlots, whose seq is i + 1 once written.
class Ring {
public:
  Ring() = default;
  Ring(uint8_t* slots, uint64_t* taken) : slots_(slots), taken_(taken) {}

  // Writer. Whether message `index` may be written now: the reader has copied out all but
  // fewer than kSlots of those before it (a taken count past index reads as no room).
  // *seen: the writer's last reading of the reader's count, read again only when it shows
  // no room (the count's cache line then stays with the reader most of the time).
  bool has_room(uint64_t index, uint64_t* seen) const {
    if (index - *seen < kSlots) return true;
    *seen = load(taken_);
    return index - *seen < kSlots;
  }
  // Requires fits() and has_room(index).
  void write(uint64_t index, MsgType type, ByteView header, ByteView data) const;

  // Reader. Copies message `index` into buf (reused; grown to kCapacity once) if it has
  // been written. malformed: its lengths do not fit its slot (why says so).
  enum class Got { nothing, frame, malformed };
  Got read(uint64_t index, Bytes& buf, MsgType* type, ByteView* header, ByteView* data, std::string* why) const;
  bool ready(uint64_t index) const { return load(seq_of(index)) == index + 1; }
  // Tells the writer that messages before count were copied out.
  void taken(uint64_t count) const { __atomic_store_n(taken_, count, __ATOMIC_RELEASE); }
  // Writer: the reader's count now (its cache line moves to the writer: not for every message).
  uint64_t taken_now() const { return load(taken_); }

private:
  uint64_t* seq_of(uint64_t index) const { return reinterpret_cast<uint64_t*>(slots_ + (index % kSlots) * kSlotSize); }
  static uint64_t load(const uint64_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
  uint8_t* slots_ = nullptr;
  uint64_t* taken_ = nullptr;
};

// A mapped segment: its control page and its two rings.
class Segment {
public:
  Segment() = default;
  explicit Segment(uint8_t* base) : base_(base) {}
  explicit operator bool() const { return base_ != nullptr; }
  uint8_t* base() const { return base_; }
  // The worker, on a new segment (zero-filled).
  void init(const LaneNonce& nonce) const;
  // The client, on a segment it attached: whether it is the one the worker offered.
  bool matches(const LaneNonce& nonce) const;
  Ring requests() const { return {base_ + kOffRequests, u64(kOffRequestsTaken)}; }
  Ring replies() const { return {base_ + kOffReplies, u64(kOffRepliesTaken)}; }
  // Idle flags (see wire-protocol.md 8.3): an end sets its own before it sleeps, then looks
  // at its ring once more; the other end, having written a slot, kicks it if it is set.
  void set_worker_idle(bool idle) const { store_flag(kOffWorkerIdle, idle); }
  bool worker_idle() const { return load_flag(kOffWorkerIdle); }
  void set_client_idle(bool idle) const { store_flag(kOffClientIdle, idle); }
  bool client_idle() const { return load_flag(kOffClientIdle); }
  // Set by a worker that reads no more of this lane's requests (it is ending): every
  // request at or past requests().taken_now() did not run, and its client may send it
  // again elsewhere (wire-protocol.md 8.4).
  void set_worker_ended() const { store_flag(kOffWorkerEnded, true); }
  bool worker_ended() const { return load_flag(kOffWorkerEnded); }

private:
  uint64_t* u64(size_t off) const { return reinterpret_cast<uint64_t*>(base_ + off); }
  void store_flag(size_t off, bool v) const { __atomic_store_n(reinterpret_cast<uint32_t*>(base_ + off), uint32_t(v), __ATOMIC_SEQ_CST); }
  bool load_flag(size_t off) const { return __atomic_load_n(reinterpret_cast<uint32_t*>(base_ + off), __ATOMIC_SEQ_CST) != 0; }
  uint8_t* base_ = nullptr;
};

// The writer's end of a lane offered by a node (wire-protocol.md 8.1): the segment shm_id,
// attached only if this uid made it, mode 0600, of kSegmentSize bytes, and its control page
// holds the offer's nonce; else null (another host or uid, or not the node's segment: UCX
// only). detach() undoes it.
Segment attach(int shm_id, const LaneNonce& nonce);
void detach(Segment s);

// Between writing a slot and reading the other end's idle flag (and between setting one's
// own flag and looking at one's ring): without it, both ends could miss each other.
inline void fence() { std::atomic_thread_fence(std::memory_order_seq_cst); }

}  // namespace xcargo::wire::lane
