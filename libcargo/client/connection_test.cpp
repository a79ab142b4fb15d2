// The client's half of a worker's replacement: requests answered `restarting` are sent again
// on a new connection, and region keys from before a reconnect are refused.
#include <catch2/catch.hpp>

#include <deque>

#include "xcargo/client.h"

using namespace xcargo;
using namespace xcargo::wire;

namespace {

// A node played by a script: each request is answered by the next canned reply (a hello is
// always answered ok); reconnect() counts and starts a new session, as the UCX transport does.
class ScriptedNode final : public client::Connection {
public:
  std::deque<ReplyStatus> invoke_statuses;  // one per invoke sent
  int reconnects = 0, invokes = 0, one_sided_reads = 0;
  bool fail_reconnect = false;

  Status start() { return handshake(nullptr, ""); }
  std::string peer() const override { return "scripted"; }
  void close() override {}

protected:
  Result<Frame> roundtrip(MsgType type, ByteView header, ByteView) override {
    const uint64_t id = leading_request_id(type, header).value_or(0);
    if (type == MsgType::hello) {
      HelloReply r;
      r.max_cargo = r.max_input = r.max_reply = 1 << 20;
      return Frame{MsgType::hello_reply, encode(r), {}};
    }
    if (type == MsgType::region) {
      RegionReply r;
      r.request_id = id;
      r.address = 0x1000;
      r.length = 4096;
      r.rkey = {1, 2, 3};
      return Frame{MsgType::region_reply, encode(r), {}};
    }
    ResultMsg m;
    m.request_id = id;
    ++invokes;
    if (!invoke_statuses.empty()) {
      m.status = invoke_statuses.front();
      invoke_statuses.pop_front();
    }
    return Frame{MsgType::result, encode(m), {}};
  }
  Status reconnect() override {
    ++reconnects;
    if (fail_reconnect) return Error(Errc::unreachable, "scripted: refused");
    return handshake(nullptr, "");
  }
  bool can_get_one_sided() const override { return true; }
  Status get_one_sided(const client::RemoteRegion&, uint64_t, void*, size_t) override {
    ++one_sided_reads;
    return {};
  }
};

}  // namespace

TEST_CASE("a request answered 'restarting' is sent again on a new connection", "[client]") {
  ScriptedNode node;
  REQUIRE(node.start().ok());
  node.invoke_statuses = {ReplyStatus::restarting, ReplyStatus::restarting, ReplyStatus::ok};
  auto r = node.invoke(Digest{}, "add", {});
  REQUIRE(r.ok());
  CHECK(r->result.status == ReplyStatus::ok);
  CHECK(node.invokes == 3);
  CHECK(node.reconnects == 2);
}

TEST_CASE("'interrupted' comes back to the caller, never sent again", "[client]") {
  ScriptedNode node;
  REQUIRE(node.start().ok());
  node.invoke_statuses = {ReplyStatus::interrupted};
  auto r = node.invoke(Digest{}, "add", {});
  REQUIRE(r.ok());
  CHECK(r->result.status == ReplyStatus::interrupted);
  CHECK(node.invokes == 1);
  CHECK(node.reconnects == 0);
}

TEST_CASE("resends are bounded, and a failed reconnect is the caller's error", "[client]") {
  ScriptedNode node;
  REQUIRE(node.start().ok());
  node.invoke_statuses.assign(20, ReplyStatus::restarting);
  auto r = node.invoke(Digest{}, "add", {});
  REQUIRE(!r.ok());
  CHECK(r.error().code() == Errc::unreachable);
  CHECK(r.error().message().find("'restarting' 6 times") != std::string::npos);
  CHECK(node.invokes == 6);

  ScriptedNode down;
  REQUIRE(down.start().ok());
  down.invoke_statuses = {ReplyStatus::restarting};
  down.fail_reconnect = true;
  auto d = down.invoke(Digest{}, "add", {});
  REQUIRE(!d.ok());
  CHECK(d.error().code() == Errc::unreachable);
  CHECK(down.invokes == 1);
}

TEST_CASE("a region's key from before a reconnect is not used", "[client]") {
  ScriptedNode node;
  REQUIRE(node.start().ok());
  auto region = node.region("data");
  REQUIRE(region.ok());
  uint8_t b[8];
  REQUIRE(node.get(*region, 0, b, 8).ok());
  CHECK(node.one_sided_reads == 1);
  node.invoke_statuses = {ReplyStatus::restarting, ReplyStatus::ok};  // the worker is replaced
  REQUIRE(node.invoke(Digest{}, "add", {}).ok());
  auto stale = node.get(*region, 0, b, 8);
  REQUIRE(!stale.ok());
  CHECK(stale.error().message().find("earlier connection") != std::string::npos);
  CHECK(node.one_sided_reads == 1);
  auto fresh = node.region("data");
  REQUIRE(fresh.ok());
  CHECK(node.get(*fresh, 0, b, 8).ok());
  CHECK(node.one_sided_reads == 2);
}
