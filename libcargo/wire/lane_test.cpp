// Tests of the lane rings (libcargo/wire/lane.h): messages go round in order, a writer never
// overwrites what the reader has not taken, and a reader refuses slots that lie.
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "wire/lane.h"

using namespace xcargo;
using namespace xcargo::wire;
using namespace xcargo::wire::lane;

namespace {

struct Mapped {  // a segment in ordinary memory, as both ends would see it
  std::vector<uint8_t> bytes = std::vector<uint8_t>(kSegmentSize + 64);
  Segment seg{reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(bytes.data()) + 63) & ~uintptr_t(63))};
};

Bytes text(const std::string& s) { return Bytes(s.begin(), s.end()); }

}  // namespace

TEST_CASE("a lane's control page names its layout and nonce", "[lane]") {
  Mapped m;
  LaneNonce n{};
  n[3] = 7;
  CHECK_FALSE(m.seg.matches(n));  // all zero: not a lane yet
  m.seg.init(n);
  CHECK(m.seg.matches(n));
  LaneNonce other = n;
  other[0] = 1;
  CHECK_FALSE(m.seg.matches(other));
  m.seg.base()[kOffSlots] = 3;  // a layout this code does not know
  CHECK_FALSE(m.seg.matches(n));
}

TEST_CASE("messages go round a ring in order, each copied out whole", "[lane]") {
  Mapped m;
  const Ring w = m.seg.requests(), r = m.seg.requests();
  Bytes buf;
  MsgType type{};
  ByteView h, d;
  std::string why;
  for (uint64_t i = 0; i < 3 * kSlots; ++i) {
    CHECK(r.read(i, buf, &type, &h, &d, &why) == Ring::Got::nothing);
    uint64_t seen = 0;
    REQUIRE(w.has_room(i, &seen));
    const Bytes header = text("header " + std::to_string(i)), data = text(std::string(i % 100, 'x'));
    w.write(i, MsgType::invoke, header, data);
    REQUIRE(r.read(i, buf, &type, &h, &d, &why) == Ring::Got::frame);
    CHECK(type == MsgType::invoke);
    CHECK(Bytes(h.begin(), h.end()) == header);
    CHECK(Bytes(d.begin(), d.end()) == data);
    r.taken(i + 1);
  }
}

TEST_CASE("a writer waits for the reader: no slot is written before it was taken", "[lane]") {
  Mapped m;
  const Ring ring = m.seg.replies();
  uint64_t seen = 0;
  for (uint64_t i = 0; i < kSlots; ++i) {
    REQUIRE(ring.has_room(i, &seen));
    ring.write(i, MsgType::result, text("r"), {});
  }
  CHECK_FALSE(ring.has_room(kSlots, &seen));  // the reader took none
  ring.taken(1);
  CHECK(ring.has_room(kSlots, &seen));
  CHECK(seen == 1);
  CHECK_FALSE(ring.has_room(kSlots + 1, &seen));
  // A reader that claims to have taken more than was written gets no room at all.
  ring.taken(kSlots * 10);
  CHECK_FALSE(ring.has_room(kSlots + 1, &seen));
  CHECK(seen == kSlots * 10);
  CHECK_FALSE(ring.has_room(kSlots + 1, &seen));
  CHECK(fits(Bytes(kCapacity - 10), Bytes(10)));
  CHECK_FALSE(fits(Bytes(kCapacity - 10), Bytes(11)));
}

TEST_CASE("a reader refuses a slot whose lengths pass its end, and reads nothing early", "[lane]") {
  Mapped m;
  const Ring ring = m.seg.requests();
  Bytes buf;
  MsgType type{};
  ByteView h, d;
  std::string why;
  uint8_t* slot = m.seg.base() + kOffRequests;
  // A seq for another message (ahead, or one round behind) is not this message.
  uint64_t seq = 5;
  std::memcpy(slot, &seq, 8);
  CHECK(ring.read(0, buf, &type, &h, &d, &why) == Ring::Got::nothing);
  seq = 1;
  std::memcpy(slot, &seq, 8);
  for (auto [hl, dl] : {std::pair<uint32_t, uint32_t>{uint32_t(kCapacity) + 1, 0}, {0, uint32_t(kCapacity) + 1},
                        {0xffffffffu, 2}, {0x80000000u, 0x80000000u}, {uint32_t(kCapacity), 1}}) {
    std::memcpy(slot + 12, &hl, 4);
    std::memcpy(slot + 16, &dl, 4);
    INFO(hl << " + " << dl);
    CHECK(ring.read(0, buf, &type, &h, &d, &why) == Ring::Got::malformed);
    CHECK(why.find("claims") != std::string::npos);
  }
  uint32_t hl = 8, dl = uint32_t(kCapacity) - 8;
  std::memcpy(slot + 12, &hl, 4);
  std::memcpy(slot + 16, &dl, 4);
  CHECK(ring.read(0, buf, &type, &h, &d, &why) == Ring::Got::frame);
  CHECK(h.size() + d.size() == kCapacity);
}
