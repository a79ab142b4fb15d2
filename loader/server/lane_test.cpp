// Tests of the worker's end of a lane (lane.h): replies wait for flush(), which tells
// whether the client sleeps and needs a kick.
#include <catch2/catch.hpp>

#include <sys/shm.h>

#include "server/lane.h"

using namespace xcargo;
using namespace xcargo::loader;
using namespace xcargo::wire;

namespace {
// A worker's lane and the client's end of it, attached as a client would.
struct Attached {
  std::unique_ptr<Lane> lane;
  lane::Segment client;
  Attached() {
    auto made = Lane::create(nullptr, 1);
    REQUIRE(made.ok());
    lane = std::move(*made);
    void* p = ::shmat(lane->shm_id(), nullptr, 0);
    REQUIRE(p != reinterpret_cast<void*>(-1));
    client = lane::Segment(static_cast<uint8_t*>(p));
  }
  ~Attached() { ::shmdt(client.base()); }
};
}  // namespace

TEST_CASE("a worker's replies are flushed once, telling whether the client sleeps", "[lane]") {
  Attached a;
  Lane& l = *a.lane;
  lane::Segment& client = a.client;
  REQUIRE(client.matches(l.nonce()));
  const Bytes header = {1, 2, 3};
  CHECK_FALSE(l.reply(MsgType::result, header, {}));  // no request came this way: the client may not read it

  client.requests().write(0, MsgType::invoke, header, {});
  MsgType type{};
  ByteView h, d;
  std::string why;
  REQUIRE(l.next(&type, &h, &d, &why) == lane::Ring::Got::frame);
  CHECK(l.unflushed() == 0);
  CHECK_FALSE(l.flush());  // nothing to tell

  REQUIRE(l.reply(MsgType::result, header, {}));
  REQUIRE(l.reply(MsgType::result, header, {}));
  CHECK(l.unflushed() == 2);
  CHECK_FALSE(l.flush());  // the client polls: no kick
  CHECK(l.unflushed() == 0);

  REQUIRE(l.reply(MsgType::result, header, {}));
  client.set_client_idle(true);
  CHECK(l.flush());        // it sleeps: one kick for what came since the last flush
  CHECK_FALSE(l.flush());  // and none for nothing new
  Bytes buf;
  for (uint64_t i = 0; i < 3; ++i)
    CHECK(client.replies().read(i, buf, &type, &h, &d, &why) == lane::Ring::Got::frame);
}

TEST_CASE("replies with requests behind them are staged until published, in order", "[lane]") {
  Attached a;
  Lane& l = *a.lane;
  lane::Segment& client = a.client;
  const Bytes request = {9};
  for (uint64_t i = 0; i < 3; ++i) client.requests().write(i, MsgType::invoke, request, {});
  MsgType type{};
  ByteView h, d;
  std::string why;
  Bytes buf;
  REQUIRE(l.next(&type, &h, &d, &why) == lane::Ring::Got::frame);
  const Bytes first = {1}, second = {2, 2}, third = {3, 3, 3};
  REQUIRE(l.reply(MsgType::result, first, Bytes{7}));  // two requests wait behind it: staged
  REQUIRE(l.next(&type, &h, &d, &why) == lane::Ring::Got::frame);
  CHECK(Bytes(h.begin(), h.end()) == request);
  REQUIRE(l.reply(MsgType::result, second, {}));
  CHECK(client.replies().read(0, buf, &type, &h, &d, &why) == lane::Ring::Got::nothing);
  CHECK(l.unflushed() == 2);
  l.publish();  // the lane batch's end (UcxServer::poll_lanes)
  REQUIRE(client.replies().read(0, buf, &type, &h, &d, &why) == lane::Ring::Got::frame);
  CHECK(Bytes(h.begin(), h.end()) == first);
  CHECK(Bytes(d.begin(), d.end()) == Bytes{7});
  REQUIRE(client.replies().read(1, buf, &type, &h, &d, &why) == lane::Ring::Got::frame);
  CHECK(Bytes(h.begin(), h.end()) == second);
  CHECK(d.empty());

  REQUIRE(l.next(&type, &h, &d, &why) == lane::Ring::Got::frame);
  REQUIRE(l.reply(MsgType::result, third, {}));  // nothing waits behind it: written at once
  REQUIRE(client.replies().read(2, buf, &type, &h, &d, &why) == lane::Ring::Got::frame);
  CHECK(Bytes(h.begin(), h.end()) == third);
  CHECK_FALSE(l.flush());  // the client polls
  CHECK(l.unflushed() == 0);

  // flush() writes a staged reply too (before the worker sleeps or runs a queued request).
  for (uint64_t i = 3; i < 5; ++i) client.requests().write(i, MsgType::invoke, request, {});
  REQUIRE(l.next(&type, &h, &d, &why) == lane::Ring::Got::frame);
  REQUIRE(l.reply(MsgType::result, first, {}));
  CHECK(client.replies().read(3, buf, &type, &h, &d, &why) == lane::Ring::Got::nothing);
  CHECK_FALSE(l.flush());
  CHECK(client.replies().read(3, buf, &type, &h, &d, &why) == lane::Ring::Got::frame);
}

TEST_CASE("a lane stages at most a batch of replies before writing them", "[lane]") {
  Attached a;
  Lane& l = *a.lane;
  lane::Segment& client = a.client;
  const Bytes request = {9};
  for (uint64_t i = 0; i < 2; ++i) client.requests().write(i, MsgType::invoke, request, {});
  MsgType type{};
  ByteView h, d;
  std::string why;
  Bytes buf;
  REQUIRE(l.next(&type, &h, &d, &why) == lane::Ring::Got::frame);
  // Replies of requests run elsewhere (the worker's queue) while a request waits in the ring.
  const Bytes big(1500, 0xab);  // 64 KiB of staging holds 43 of these
  for (int i = 0; i < 50; ++i) REQUIRE(l.reply(MsgType::result, big, {}));
  // The first 32 went out when the 33rd was staged (kStageMost); the rest wait for publish().
  CHECK(client.replies().read(31, buf, &type, &h, &d, &why) == lane::Ring::Got::frame);
  CHECK(client.replies().read(32, buf, &type, &h, &d, &why) == lane::Ring::Got::nothing);
  l.publish();
  for (uint64_t i = 0; i < 50; ++i) {
    REQUIRE(client.replies().read(i, buf, &type, &h, &d, &why) == lane::Ring::Got::frame);
    CHECK(Bytes(h.begin(), h.end()) == big);
  }
}
