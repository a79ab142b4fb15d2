// The client's half of a worker's replacement: requests answered `restarting` are sent again
// on a new connection, and region keys from before a reconnect are refused.
#include <catch2/catch.hpp>

#include <algorithm>
#include <deque>
#include <set>
#include <vector>

#include "client/session.h"

using namespace xcargo;
using namespace xcargo::wire;

namespace {

// A node played by a script: each request is answered by the next canned reply (a hello is
// always answered ok); reconnect() counts and starts a new session, as the UCX transport does.
class ScriptedNode final : public client::Session {
public:
  std::deque<ReplyStatus> invoke_statuses;  // one per invoke sent
  int reconnects = 0, invokes = 0, one_sided_reads = 0;
  bool fail_reconnect = false;
  // Pipelining: requests queue up, and each next_reply answers the newest one (replies
  // out of order); lose_after: the connection drops once that many invokes were sent.
  bool pipelined = false;
  size_t max_in_flight = 0;
  int lose_after = -1;
  int unanswered = -1;  // pipelining: the invoke of this number (from 1) is never answered
  // Pipelining, first connection: invokes from this number on are neither answered nor run;
  // once the connection fails, never_read() names them (a lane whose worker ended).
  int unread_from = -1;
  std::vector<uint64_t> unread;
  int runs = 0;  // invokes answered (run)
  bool lose_next_unread = false;  // the next invoke is lost, and never_read() names it
  std::vector<Frame> queued;
  std::vector<Invoke> invoked;  // every invoke header sent, decoded

  Status start() { return handshake(nullptr, ""); }
  std::string peer() const override { return "scripted"; }
  void close() override {}

protected:
  Result<Frame> roundtrip(MsgType type, ByteView header, ByteView) override {
    const uint64_t id = leading_request_id(type, header).value_or(0);
    if (type == MsgType::invoke && lose_next_unread) {  // written into a lane its worker no longer read
      lose_next_unread = false;
      unread = {id};
      return Error(Errc::unreachable, "scripted: lost");
    }
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
    if (type == MsgType::invoke) {
      auto inv = decode_invoke(header);
      if (!inv.ok()) return inv.error();
      invoked.push_back(*inv);
    }
    ResultMsg m;
    m.request_id = id;
    ++invokes;
    if (type == MsgType::invoke && !pipelined) ++runs;
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
  bool pipelines() const override { return pipelined; }
  Status send_request(MsgType type, ByteView header, ByteView data) override {
    if (lose_after >= 0 && invokes >= lose_after) return Error(Errc::unreachable, "scripted: lost");
    auto f = roundtrip(type, header, data);
    XC_TRY(f);
    if (type == MsgType::invoke && invokes == unanswered) return {};  // its kernel hangs its worker
    if (type == MsgType::invoke && reconnects == 0 && unread_from >= 0 && invokes >= unread_from) {
      unread.push_back(leading_request_id(type, header).value_or(0));
      return {};
    }
    if (type == MsgType::invoke) ++runs;
    queued.push_back(std::move(*f));
    max_in_flight = std::max(max_in_flight, queued.size());
    return {};
  }
  Result<Frame> next_reply() override {
    if (queued.empty() || (lose_after >= 0 && invokes >= lose_after)) return Error(Errc::unreachable, "scripted: lost");
    Frame f = std::move(queued.back());
    queued.pop_back();
    return f;
  }
  std::vector<uint64_t> never_read() const override { return queued.empty() ? unread : std::vector<uint64_t>{}; }
  bool can_get_one_sided() const override { return true; }
  Status get_one_sided(const client::RemoteRegion&, uint64_t, void*, size_t) override {
    ++one_sided_reads;
    return {};
  }
};

}  // namespace

TEST_CASE("invoking into one reply fills it each time, its header re-encoded only when the call changes", "[client]") {
  ScriptedNode node;
  REQUIRE(node.start().ok());
  node.invoke_statuses = {ReplyStatus::ok, ReplyStatus::refused, ReplyStatus::ok, ReplyStatus::restarting, ReplyStatus::ok};
  Digest other{};
  other[0] = 7;
  const uint8_t three[3] = {1, 2, 3};
  client::InvokeReply r;
  REQUIRE(node.invoke(Digest{}, "add", {}, r).ok());
  CHECK(r.result.status == ReplyStatus::ok);
  REQUIRE(node.invoke(Digest{}, "add", {}, r).ok());
  CHECK(r.result.status == ReplyStatus::refused);  // a refusal comes back in the reply
  REQUIRE(node.invoke(other, "mul", ByteView(three, 3), r).ok());
  REQUIRE(node.invoke(Digest{}, "add", {}, r).ok());  // answered 'restarting', then sent again
  CHECK(r.result.status == ReplyStatus::ok);
  CHECK(node.reconnects == 1);
  REQUIRE(node.invoked.size() == 5);
  for (size_t i : {0, 1, 3, 4}) {
    CHECK(node.invoked[i].entry == "add");
    CHECK(node.invoked[i].digest == Digest{});
    CHECK(node.invoked[i].input_size == 0);
  }
  CHECK(node.invoked[2].entry == "mul");
  CHECK(node.invoked[2].digest == other);
  CHECK(node.invoked[2].input_size == 3);
  std::set<uint64_t> ids;
  for (const Invoke& i : node.invoked) ids.insert(i.request_id);
  CHECK(ids.size() == 4);  // each with its own id; the one sent again keeps its own
  CHECK(node.invoked[4].request_id == node.invoked[3].request_id);
  CHECK(r.result.request_id == node.invoked[4].request_id);
  CHECK(node.invoke(Digest{}, std::string(kMaxName + 1, 'x'), {}, r).error().code() == Errc::invalid_argument);
}

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

namespace {
// Runs count invocations `window` at a time; the statuses each index was told, in order.
std::vector<std::vector<std::string>> pipelined(ScriptedNode& node, size_t count, size_t window, Status* out) {
  std::vector<std::vector<std::string>> told(count);
  *out = node.invoke_pipelined(
      count, [](size_t) { return client::Invocation{Digest{}, "add", {}}; }, window,
      [&](size_t i, Result<client::InvokeReply>& r) { told.at(i).push_back(r.ok() ? status_name(r->result.status) : "error"); });
  return told;
}
}  // namespace

TEST_CASE("pipelined invocations: every one answered once, at most `window` in flight", "[client]") {
  ScriptedNode node;
  node.pipelined = true;
  REQUIRE(node.start().ok());
  Status s;
  auto told = pipelined(node, 100, 8, &s);
  REQUIRE(s.ok());
  for (const auto& t : told) CHECK(t == std::vector<std::string>{"ok"});
  CHECK(node.max_in_flight == 8);
  CHECK(node.invokes == 100);
}

TEST_CASE("pipelined: each invocation's header names its own id, digest, entry and input size", "[client]") {
  ScriptedNode node;
  node.pipelined = true;
  REQUIRE(node.start().ok());
  const uint8_t input[16] = {};
  Digest other{};
  other[0] = 1;
  // Runs of the same call (whose header is only given a new id) between changes of one field.
  auto call = [&](size_t i) {
    const size_t k = i / 3;
    return client::Invocation{k % 4 == 1 ? other : Digest{}, k % 4 == 2 ? "mul" : "add", ByteView(input, k % 4 == 3 ? 16 : 8)};
  };
  std::vector<int> told(40);
  Status s = node.invoke_pipelined(40, call, 8, [&](size_t i, Result<client::InvokeReply>& r) { told.at(i) += r.ok(); });
  REQUIRE(s.ok());
  CHECK(std::count(told.begin(), told.end(), 1) == 40);
  REQUIRE(node.invoked.size() == 40);
  std::set<uint64_t> ids;
  for (size_t i = 0; i < 40; ++i) {
    const client::Invocation c = call(i);
    CHECK(node.invoked[i].digest == c.digest);
    CHECK(node.invoked[i].entry == c.entry);
    CHECK(node.invoked[i].input_size == c.input.size());
    ids.insert(node.invoked[i].request_id);
  }
  CHECK(ids.size() == 40);
}

TEST_CASE("pipelined: 'restarting' ones are sent again on a new connection once the rest are answered", "[client]") {
  ScriptedNode node;
  node.pipelined = true;
  REQUIRE(node.start().ok());
  node.invoke_statuses.assign(10, ReplyStatus::ok);
  node.invoke_statuses.insert(node.invoke_statuses.end(), {ReplyStatus::restarting, ReplyStatus::interrupted, ReplyStatus::restarting});
  Status s;
  auto told = pipelined(node, 40, 4, &s);
  REQUIRE(s.ok());
  int interrupted = 0;
  for (const auto& t : told) {
    REQUIRE(t.size() == 1);
    interrupted += t[0] == "interrupted";
    CHECK((t[0] == "ok" || t[0] == "interrupted"));
  }
  CHECK(interrupted == 1);
  // The first 'restarting' (the 11th sent, answered first: replies come newest first) stops
  // the sending; once the rest are in, a reconnect and its resend takes the interrupted
  // status, and a later request the second 'restarting': a second reconnect.
  CHECK(node.reconnects == 2);
  CHECK(node.invokes == 42);  // two sent again
}

namespace {
// Each invocation told once: `ok`, but for invocation `failed`, told an error.
void all_ok_but(const std::vector<std::vector<std::string>>& told, size_t failed) {
  for (size_t i = 0; i < told.size(); ++i) {
    INFO("invocation " << i);
    REQUIRE(told[i].size() == 1);
    CHECK(told[i][0] == (i == failed ? "error" : "ok"));
  }
}
}  // namespace

TEST_CASE("pipelined: after 'restarting', a lost connection sends the ones that did not run to a new one", "[client]") {
  // A worker ended by a kernel that hung it (it blocked the time-out signal): the requests
  // behind that kernel were answered 'restarting', its own never is, and the connection goes.
  ScriptedNode node;
  node.pipelined = true;
  REQUIRE(node.start().ok());
  node.unanswered = 4;
  node.invoke_statuses = {ReplyStatus::ok, ReplyStatus::ok, ReplyStatus::ok, ReplyStatus::ok,
                          ReplyStatus::restarting, ReplyStatus::restarting, ReplyStatus::restarting, ReplyStatus::restarting};
  Status s;
  auto told = pipelined(node, 20, 8, &s);
  REQUIRE(s.ok());
  all_ok_but(told, 3);  // the hung one may have run: told so, not sent again
  CHECK(node.reconnects == 1);
  CHECK(node.invokes == 24);  // four sent again
}

TEST_CASE("pipelined: requests the ended node marks as never read go to a new connection", "[client]") {
  // wire-protocol.md 8.4: no 'restarting' came (the client wrote them after the node's last
  // look at its lane), but the lane says they were never copied out.
  ScriptedNode node;
  node.pipelined = true;
  REQUIRE(node.start().ok());
  node.unanswered = 4;
  node.unread_from = 5;
  Status s;
  auto told = pipelined(node, 20, 8, &s);
  REQUIRE(s.ok());
  all_ok_but(told, 3);
  CHECK(node.reconnects == 1);
  CHECK(node.runs == 19);  // each once; the hung one is not sent again
}

TEST_CASE("one invocation the ended node marks as never read goes to a new connection", "[client]") {
  ScriptedNode node;
  REQUIRE(node.start().ok());
  node.lose_next_unread = true;
  auto r = node.invoke(Digest{}, "add", {});
  REQUIRE(r.ok());
  CHECK(r->result.status == ReplyStatus::ok);
  CHECK(node.reconnects == 1);
  CHECK(node.runs == 1);
}

TEST_CASE("pipelined: a lost connection tells every invocation not yet told, once", "[client]") {
  ScriptedNode node;
  node.pipelined = true;
  REQUIRE(node.start().ok());
  node.lose_after = 20;
  Status s;
  auto told = pipelined(node, 50, 8, &s);
  REQUIRE(!s.ok());
  CHECK(s.error().code() == Errc::unreachable);
  for (const auto& t : told) CHECK(t.size() == 1);
  CHECK(std::count_if(told.begin(), told.end(), [](const auto& t) { return t[0] == "ok"; }) < 20);

  ScriptedNode serial;  // a transport that cannot pipeline runs them one at a time
  REQUIRE(serial.start().ok());
  told = pipelined(serial, 5, 8, &s);
  REQUIRE(s.ok());
  CHECK(serial.invokes == 5);
}

TEST_CASE("a bare address reaches a node over UCX only on loopback; a scheme says which transport", "[client][route]") {
  auto route = [](const std::string& a) {
    auto r = client::route_of(a);
    REQUIRE(r.ok());
    return std::make_pair(r->tls, r->host_port);
  };
  CHECK(route("127.0.0.1:7400") == std::make_pair(false, std::string("127.0.0.1:7400")));
  CHECK(route("127.3.2.1:7400") == std::make_pair(false, std::string("127.3.2.1:7400")));
  CHECK(route("localhost:7400") == std::make_pair(false, std::string("localhost:7400")));
  CHECK(route("10.1.2.3:7401") == std::make_pair(true, std::string("10.1.2.3:7401")));  // another host: TLS
  CHECK(route("tls://127.0.0.1:7401") == std::make_pair(true, std::string("127.0.0.1:7401")));
  CHECK(route("ucx://10.1.2.3:7400") == std::make_pair(false, std::string("10.1.2.3:7400")));  // said on purpose
  auto other = client::route_of("http://10.1.2.3:7400");
  REQUIRE_FALSE(other.ok());
  CHECK(other.error().message() == "http://10.1.2.3:7400: not an address a node serves");
  CHECK_FALSE(client::route_of("10.1.2.3:notaport").ok());
}

TEST_CASE("a bare address of another host goes over TLS, and needs its node's key pinned", "[client][route]") {
  client::ConnectOptions o;
  o.known_nodes = "/nonexistent/known_nodes";
  o.identity_key = nullptr;
  auto c = client::connect("10.255.255.1:7401", o);
  REQUIRE_FALSE(c.ok());
  CHECK(c.error().code() == Errc::unauthenticated);
  CHECK(c.error().message().find("tls://10.255.255.1:7401: this node's key is not known") == 0);
  REQUIRE(c.error().hints().size() == 3);
  CHECK(c.error().hints()[2].find("ucx://10.255.255.1:7401") != std::string::npos);
}
