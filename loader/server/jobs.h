// The worker's queue of requests taken in and not yet running: a request runs once all its
// data is here, oldest first, and one still arriving holds up nobody; one whose data stops
// arriving is dropped after its transfer deadline (timing.h).
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include "server/endpoint.h"
#include "server/in_flight.h"
#include "common/large_buffers.h"
#include "xcargo/types.h"
#include "wire/wire.h"


namespace xcargo::loader {

class Lane;
using Clock = std::chrono::steady_clock;

// A request copied out of UCX's receive callback, or still arriving by rendezvous.
struct Job {
  Ep ep;                          // null for forwards, which answer their client by address
  uint64_t serial = 0;            // ep's connection (an endpoint address is reused after a close)
  wire::MsgType type{};
  Bytes header, data;
  Bytes reply_address;            // invoke: the client's, from its hello
  std::shared_ptr<const std::string> origin;  // its connection's Client::origin, for log lines
  std::atomic<bool> ready{false};  // data complete (set by UCX's completion callback)
  bool failed = false;             // header too long, or the transfer failed
  const char* receive_error = nullptr;  // why the transfer failed, in its transport's words
  Clock::time_point since;         // when its header came (the transfer deadline)
  uint64_t length = 0;             // its data's length
  std::optional<Charge> charge;    // its share of its connection's and key's limits
  std::shared_ptr<Lane> lane;      // the lane it came through, counted there until taken (Lane::queued)
  // Set by whoever answers it first: its executor with its result, the monitor with a
  // time-out, or a worker about to be replaced with `interrupted` (exactly one reply).
  std::atomic<bool> answered{false};
  std::atomic<bool> cancelled{false};  // its client sent `cancel`: it does not run, or is stopped (wire-protocol.md 4.15)

  ~Job() { release_large(std::move(data)); }  // a large input's pages serve the next one
};

class JobQueue {
public:
  void push(std::shared_ptr<Job> job) { jobs_.push_back(std::move(job)); }
  bool any_ready() const;
  // The oldest request whose data is all here, taken off the queue; null if none.
  std::shared_ptr<Job> take_ready();
  // Requests whose data did not arrive within their transfer deadline, taken off the queue.
  // The caller closes their connections; UCX still writes into them until it reports the
  // receive failed, so they are kept (hold) until then.
  std::vector<std::shared_ptr<Job>> expire(Clock::time_point now);
  void hold(std::shared_ptr<Job> job) { held_.push_back(std::move(job)); }
  // Every request still queued, arrived or arriving, taken off the queue (a worker about to
  // be replaced answers them).
  std::vector<std::shared_ptr<Job>> take_all();
  size_t size() const { return jobs_.size(); }
  // The queued request for which pred holds, still on the queue; null if none.
  template <class Pred>
  std::shared_ptr<Job> find(Pred pred) const {
    for (const auto& j : jobs_)
      if (pred(*j)) return j;
    return nullptr;
  }
  size_t held() const { return held_.size(); }

private:
  std::deque<std::shared_ptr<Job>> jobs_;
  std::vector<std::shared_ptr<Job>> held_;
};

}  // namespace xcargo::loader
