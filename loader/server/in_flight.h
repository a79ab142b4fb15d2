// Requests in flight per connection and per key (loader/README.md, "Requests in flight"):
// what each holds, the charge a request takes while it is queued, arriving or running, and
// the check before a new one is taken in.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

namespace xcargo::loader {

// Requests in flight and the bytes of their data, and the bytes of replies sent but not yet
// taken by the client, for one connection or for one key over all its connections. Requests
// end on any executor thread, hence atomics.
struct Usage {
  std::atomic<int> requests{0};
  std::atomic<uint64_t> bytes{0};
  std::atomic<uint64_t> replies{0};
};

// Requests one connection, and one key over all its connections, may have in flight, and
// how many times the largest request the node accepts their data may total.
inline constexpr int kMaxRequestsPerConnection = 128;
inline constexpr int kMaxRequestsPerKey = 512;
inline constexpr uint64_t kBytesInFlightPerConnection = 2;
inline constexpr uint64_t kBytesInFlightPerKey = 4;

// What a reply waiting for its client counts as: its bytes, but at least 4 KiB, about what
// the worker and UCX hold for one (its request, its buffers). Without the floor a client
// that never reads its small replies (sending requests through its lane, which needs no UCX
// progress) makes the worker hold millions of them, gigabytes within seconds, until
// bad_alloc (guarded by in_flight_test.cpp, "a small unread reply counts as 4 KiB: ...", and
// tests/e2e/boundary_test.sh, the lane attack's unread case).
inline constexpr uint64_t kUnreadReplyFloor = 4096;
inline uint64_t unread_charge(uint64_t size) { return size > kUnreadReplyFloor ? size : kUnreadReplyFloor; }

// Why one more request of `length` bytes would take its connection or its key (either may
// be null) past their limits, unread replies included; empty if it would not. largest: the
// largest request or reply the node accepts; request data over it is never fetched and
// counts 0 bytes.
std::string over_limit(const Usage* connection, const Usage* key, uint64_t length, uint64_t largest);
// Why a reply of `size` bytes cannot wait for its client: the connection's or the key's
// unread replies would pass the same byte limits (the client does not read them); empty if
// it can.
std::string unread_over_limit(const Usage* connection, const Usage* key, uint64_t size, uint64_t largest);

// A request's (or an unread reply's) share of its connection's and its key's usage, given
// back when it ends.
class Charge {
public:
  enum Kind { request, reply };
  Charge() = default;
  Charge(std::shared_ptr<Usage> connection, std::shared_ptr<Usage> key, uint64_t bytes, Kind kind = request);
  Charge(const Charge&) = delete;
  Charge& operator=(const Charge&) = delete;
  ~Charge();

private:
  std::shared_ptr<Usage> usage_[2];
  uint64_t bytes_ = 0;
  Kind kind_ = request;
};

}  // namespace xcargo::loader
