// A connection's shared-memory lane, the worker's end (format-spec/wire-protocol.md section
// 8): the segment it made, the next request to copy out, and replies written into it.
// Transport-free; only the leader touches a lane.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "server/endpoint.h"
#include "xcargo/error.h"
#include "wire/lane.h"


namespace xcargo::loader {

// Lanes per worker, at kSegmentSize (516 KiB) each: past this, lane requests get `limit`.
inline constexpr size_t kMaxLanes = 64;

class Lane {
public:
  // A System V segment, mode 0600 (only this uid, or root, can attach it), marked for
  // removal at once: it goes away when both ends have detached, whatever happens to them.
  static Result<std::unique_ptr<Lane>> create(Ep ep, uint64_t serial);
  ~Lane();
  Lane(const Lane&) = delete;
  Lane& operator=(const Lane&) = delete;

  int shm_id() const { return id_; }
  const wire::lane::LaneNonce& nonce() const { return nonce_; }
  Ep ep() const { return ep_; }
  uint64_t serial() const { return serial_; }

  // The next request, copied out (views into this lane's buffer, good until the next call).
  // malformed: the lane is broken for good (why says why), and nothing more is read from it.
  wire::lane::Ring::Got next(wire::MsgType* type, ByteView* header, ByteView* data, std::string* why);
  // The same, copied into buf: for the worker's forced end, while the stuck thread's kernel
  // may still read its input in this lane's own buffer.
  wire::lane::Ring::Got next_into(Bytes& buf, wire::MsgType* type, ByteView* header, ByteView* data, std::string* why);
  bool pending() const { return !broken_ && seg_.requests().ready(next_request_); }
  // Takes a reply if the client has written a request into the lane (so it attached the
  // segment and reads it: a client that could not attach it, another uid's, say, gets all
  // its replies through UCX), the reply fits and its slot is free; false: it goes another
  // way (UCX). Written into the ring at once when no request of the client's waits behind
  // it, else staged until publish() (at most kStageMost, kStageBytes). A client polling the
  // lane sees it; one that sleeps needs a kick, which flush() tells (one fence for a batch of
  // replies: a fence per reply waits, each time, until the slot's cache lines have reached
  // the client's core).
  bool reply(wire::MsgType type, ByteView header, ByteView data);
  // Writes the staged replies into the ring, where a polling client sees them. Why stage:
  // the client polls the slot a reply goes to, so a reply's stores wait for the slot's lines
  // to come back from the client's core, and every later store waits behind them (stores
  // leave in order): a third of the worker's time with 64 in flight, in a profile.
  // A batch's slots are fetched together. Written one at a time, after each next request's
  // copy, they gain nothing (0.99 of the unstaged rate; the batch: 1.15).
  // Leader only, but for the worker's forced end (UcxServer), when the leader is stuck in a
  // kernel: the staged replies were made before it, and must not be lost with the process.
  // The staging buffers never grow past their reserve, so that end writes from stable memory.
  void publish();
  // After replies: publishes them; whether the client sleeps and needs a kick to see them.
  bool flush();
  uint32_t unflushed() const { return unflushed_; }  // replies since the last flush()
  void set_idle(bool idle) const { seg_.set_worker_idle(idle); }
  bool broken() const { return broken_; }
  // This worker reads no more of the lane's requests (it is ending): its client may send
  // those it did not copy out to the next one (wire-protocol.md 8.4).
  void mark_ended() const { seg_.set_worker_ended(); }
  // Reads nothing more from the lane and writes nothing more into it (a client broke the protocol).
  void stop() { broken_ = true; }
  uint64_t requests() const { return next_request_; }
  // Its requests in the worker's queue, not yet taken to run (Job::lane). While there is
  // one, the requests after it stay in the ring: they run in order, and one queued request
  // does not make the later ones take the queue's slower path (with 64 in flight, about half
  // of them would: a Job, its charge and copies, and a clock read a turn, in a profile).
  void queued(int delta) { queued_ += delta; }
  bool waits_in_queue() const { return queued_ > 0; }

private:
  Lane() = default;
  wire::lane::Segment seg_;
  int id_ = -1;
  wire::lane::LaneNonce nonce_{};
  Ep ep_;
  uint64_t serial_ = 0;
  uint64_t next_request_ = 0, next_reply_ = 0;
  uint64_t replies_taken_ = 0;  // the client's count, as last read (Ring::has_room)
  bool broken_ = false;
  bool used_ = false;  // a request came through it
  uint32_t unflushed_ = 0;
  int queued_ = 0;
  Bytes buf_;
  struct Staged {
    wire::MsgType type;
    uint32_t at, header, data;  // in stage_
  };
  static constexpr size_t kStageMost = 32, kStageBytes = 64 * 1024;
  std::vector<Staged> staged_;
  Bytes stage_;
};

}  // namespace xcargo::loader
