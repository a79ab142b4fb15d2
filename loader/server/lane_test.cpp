// Tests of the worker's end of a lane (lane.h): replies wait for flush(), which tells
// whether the client sleeps and needs a kick.
#include <catch2/catch.hpp>

#include <sys/shm.h>

#include "lane.h"

using namespace xcargo;
using namespace xcargo::loader;
using namespace xcargo::wire;

TEST_CASE("a worker's replies are flushed once, telling whether the client sleeps", "[lane]") {
  auto made = Lane::create(nullptr, 1);
  REQUIRE(made.ok());
  Lane& l = **made;
  void* p = ::shmat(l.shm_id(), nullptr, 0);  // the client's end
  REQUIRE(p != reinterpret_cast<void*>(-1));
  lane::Segment client(static_cast<uint8_t*>(p));
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
  ::shmdt(p);
}
