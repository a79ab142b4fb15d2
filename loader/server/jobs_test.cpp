// The job queue: a ready request never waits behind one still arriving, and a transfer
// that stops is dropped after its deadline.
#include <catch2/catch.hpp>

#include "server/jobs.h"
#include "timing.h"

using namespace xcargo::loader;
using namespace std::chrono_literals;

namespace {
std::shared_ptr<Job> job(uint64_t serial, bool ready, Clock::time_point since, uint64_t length = 0) {
  auto j = std::make_shared<Job>();
  j->serial = serial;
  j->ready = ready;
  j->since = since;
  j->length = length;
  return j;
}
}  // namespace

TEST_CASE("ready requests run oldest first, past those still arriving", "[jobs]") {
  const auto t0 = Clock::now();
  JobQueue q;
  auto arriving = job(1, false, t0, 64 << 20);
  q.push(arriving);
  CHECK_FALSE(q.any_ready());
  CHECK(q.take_ready() == nullptr);
  q.push(job(2, true, t0));
  q.push(job(3, true, t0));
  CHECK(q.any_ready());
  CHECK(q.take_ready()->serial == 2);
  CHECK(q.take_ready()->serial == 3);
  CHECK(q.take_ready() == nullptr);
  arriving->ready = true;  // its data came
  CHECK(q.take_ready()->serial == 1);
  CHECK(q.size() == 0);
}

TEST_CASE("a transfer that stops is dropped after its deadline and held until UCX lets go", "[jobs]") {
  const auto t0 = Clock::now();
  JobQueue q;
  q.push(job(1, false, t0, 0));
  q.push(job(2, false, t0, 100'000'000));  // 100 MB: 10 s more at 10 MB/s
  q.push(job(3, true, t0));
  CHECK(timing::transfer_deadline(100'000'000) == 20s);
  CHECK(q.expire(t0 + 9s).empty());
  auto late = q.expire(t0 + 11s);
  REQUIRE(late.size() == 1);
  CHECK(late[0]->serial == 1);
  q.hold(late[0]);
  CHECK(q.held() == 1);
  CHECK(q.size() == 2);
  late[0]->ready = true;  // UCX reported the receive failed
  CHECK(q.expire(t0 + 12s).empty());
  CHECK(q.held() == 0);
  late = q.expire(t0 + 21s);
  REQUIRE(late.size() == 1);
  CHECK(late[0]->serial == 2);
  CHECK(q.take_ready()->serial == 3);  // a ready one is never expired
}

TEST_CASE("a job gives its charge back when it ends", "[jobs]") {
  auto conn = std::make_shared<Usage>();
  {
    JobQueue q;
    auto j = job(1, true, Clock::now());
    j->charge.emplace(conn, nullptr, 500);
    q.push(std::move(j));
    CHECK(conn->requests == 1);
    CHECK(conn->bytes == 500);
    auto taken = q.take_ready();
    CHECK(conn->requests == 1);  // running: still in flight
  }
  CHECK(conn->requests == 0);
  CHECK(conn->bytes == 0);
}
