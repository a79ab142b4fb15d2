// The connection table: serials, per-host crowding, refusals, and when connections close.
#include <catch2/catch.hpp>

#include "server/connections.h"
#include "timing.h"

using namespace xcargo::loader;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {
Ep ep(uintptr_t n) { return reinterpret_cast<ucp_ep*>(n); }
}

TEST_CASE("a reused endpoint is a new connection", "[connections]") {
  Connections t;
  const auto now = Clock::now();
  const uint64_t first = t.add(ep(1), "10.0.0.1:5000", now).serial;
  CHECK(t.live(ep(1), first) == ep(1));
  const uint64_t second = t.add(ep(1), "10.0.0.1:5001", now).serial;
  CHECK(second != first);
  CHECK(t.live(ep(1), first) == nullptr);  // a reply to the old connection is dropped
  CHECK(t.live(ep(1), second) == ep(1));
  CHECK(t.erase(ep(1)));
  CHECK(t.live(ep(1), second) == nullptr);
  CHECK(t.find(ep(1)) == nullptr);
}

TEST_CASE("a connection found again is the table's, until it leaves the table", "[connections]") {
  Connections t;
  const auto now = Clock::now();
  t.add(ep(1), "10.0.0.1:5000", now);
  t.add(ep(2), "10.0.0.2:5000", now);
  Client* one = t.find(ep(1));
  REQUIRE(one);
  CHECK(t.find(ep(1)) == one);
  CHECK(t.find(ep(2))->peer == "10.0.0.2:5000");
  CHECK(t.find(ep(1)) == one);
  CHECK(t.find(ep(3)) == nullptr);
  CHECK(t.find(nullptr) == nullptr);
  t.add(ep(3), "10.0.0.3:5000", now);  // another one added: the one found stays valid
  CHECK(t.find(ep(1)) == one);
  CHECK(t.erase(ep(1)));
  CHECK(t.find(ep(1)) == nullptr);
  // Swept out (refused, past its linger) right after it was found.
  Connections::doom(*t.find(ep(2)), now - timing::kRefusalLinger - 1ms);
  CHECK(t.find(ep(2)) != nullptr);
  CHECK(t.sweep(now, false, 1h, nullptr) == std::vector<Ep>{ep(2)});
  CHECK(t.find(ep(2)) == nullptr);
  CHECK(t.find(ep(3))->peer == "10.0.0.3:5000");
  t.clear();
  CHECK(t.find(ep(3)) == nullptr);
}

TEST_CASE("one host may hold 1024 connections, 128 of them unauthenticated", "[connections]") {
  Connections t;
  const auto now = Clock::now();
  uintptr_t n = 0;
  auto add = [&](const std::string& host) -> Client& {
    ++n;
    return t.add(ep(n), host + ":" + std::to_string(n), now);
  };
  for (size_t i = 0; i < kMaxUnauthenticatedPerHost; ++i) add("10.0.0.12");
  CHECK(t.admit("10.0.0.1", true) == "");  // another host, though its address starts the same
  for (size_t i = 0; i + 1 < kMaxUnauthenticatedPerHost; ++i) add("10.0.0.1");
  add("10.0.0.1").probe = true;  // the worker's own probe never counts
  CHECK(t.admit("10.0.0.1", true) == "");
  add("10.0.0.1");
  CHECK(t.admit("10.0.0.1", true) == "128 of its connections have not authenticated yet");
  CHECK(t.admit("10.0.0.1", false) == "");  // an open node has no authentication to wait for
  CHECK(t.admit("10.0.0.2", true) == "");   // other hosts are not held up
  for (const auto& [e, c] : t.all()) t.find(e)->session.authenticated = true;
  while (t.all().size() < kMaxUnauthenticatedPerHost + 1 + kMaxConnectionsPerHost)  // 10.0.0.12's, the probe, 10.0.0.1's
    add("10.0.0.1").session.authenticated = true;
  CHECK(t.admit("10.0.0.1", true) == "it has 1024 connections open, the node's limit per host");
  CHECK(t.admit("10.0.0.1", false) == "it has 1024 connections open, the node's limit per host");
  CHECK(t.admit("10.0.0.2", true) == "");
}

TEST_CASE("all hosts together may hold 8192 connections, 1024 of them unauthenticated", "[connections]") {
  Connections t;
  const auto now = Clock::now();
  uintptr_t n = 0;
  auto add = [&](size_t host) -> Client& {  // 100 connections a host, each host another address
    ++n;
    return t.add(ep(n), "10.1." + std::to_string(host) + ".1:" + std::to_string(n), now);
  };
  for (size_t i = 0; i < kMaxUnauthenticated; ++i) add(i / 100);
  CHECK(t.admit("10.2.0.1", true) == "1024 connections from all hosts have not authenticated yet, the node's limit");
  CHECK(t.admit("10.2.0.1", false) == "");  // an open node has no authentication to wait for
  for (const auto& [e, c] : t.all()) t.find(e)->session.authenticated = true;
  CHECK(t.admit("10.2.0.1", true) == "");
  while (t.all().size() < kMaxConnections) add(n / 100).session.authenticated = true;
  CHECK(t.admit("10.2.0.1", true) == "the node has 8192 connections open, its limit");
  CHECK(t.admit("10.2.0.1", false) == "the node has 8192 connections open, its limit");
}

TEST_CASE("connections that do not authenticate in time are closed; refused ones after their refusal", "[connections]") {
  Connections t;
  const auto t0 = Clock::now();
  t.add(ep(1), "a:1", t0);                                // never authenticates
  t.add(ep(2), "b:2", t0).session.authenticated = true;   // did
  t.add(ep(3), "c:3", t0).probe = true;                   // the worker's own probe
  Connections::doom(t.add(ep(4), "d:4", t0), t0);         // refused
  std::vector<std::string> late;
  CHECK(t.sweep(t0 + 100ms, true, 10000ms, &late).empty());  // the refusal is still on its way
  CHECK(t.sweep(t0 + timing::kRefusalLinger + 1ms, true, 10000ms, &late) == std::vector<Ep>{ep(4)});
  CHECK(late.empty());
  CHECK(t.sweep(t0 + 5s, false, 1000ms, &late).empty());  // an open node has no deadline
  CHECK(t.sweep(t0 + 11s, true, 10000ms, &late) == std::vector<Ep>{ep(1)});
  CHECK(late == std::vector<std::string>{"a:1"});
  CHECK(t.all().size() == 2);
}

TEST_CASE("requests refused before authenticating: logged 3 times, the connection closed at 8", "[connections]") {
  Connections t;
  const auto now = Clock::now();
  Client& c = t.add(ep(1), "a:1", now);
  int logged = 0, closings = 0;
  for (unsigned i = 1; i <= 20; ++i) {
    bool closing = false;
    logged += t.refused(c, now, &closing);
    closings += closing;
    if (i == kMaxRefusals) CHECK(closing);
  }
  CHECK(logged == int(kLoggedRefusals));
  CHECK(closings == 1);
  CHECK(c.doomed);
  Client& ok = t.add(ep(2), "b:2", now);
  ok.session.authenticated = true;
  for (int i = 0; i < 20; ++i) {
    bool closing = false;
    (void)t.refused(ok, now, &closing);  // a verb it lacks: refused, but it may go on
    CHECK_FALSE(closing);
  }
  CHECK_FALSE(ok.doomed);
}

TEST_CASE("connections of one key share the key's usage", "[connections]") {
  Connections t;
  const auto now = Clock::now();
  Client& a = t.add(ep(1), "a:1", now);
  Client& b = t.add(ep(2), "a:2", now);
  Client& c = t.add(ep(3), "a:3", now);
  a.session.who = b.session.who = "key 0123 (ci)";
  c.session.who = "key 4567 (alice)";
  for (Client* x : {&a, &b, &c}) t.authenticated(*x);
  REQUIRE(a.key_usage);
  CHECK(a.key_usage == b.key_usage);
  CHECK(a.key_usage != c.key_usage);
  CHECK(a.usage != b.usage);
  Client& open = t.add(ep(4), "a:4", now);  // an open node: no key, no key usage
  t.authenticated(open);
  CHECK_FALSE(open.key_usage);
}

TEST_CASE("a flood of connections that never authenticate makes way for newcomers, oldest first", "[connections]") {
  Connections t;
  const auto start = Clock::now();
  uintptr_t n = 0;
  auto add = [&](const std::string& host, Clock::time_point at) -> Client& {
    ++n;
    return t.add(ep(n), host + ":" + std::to_string(n), at);
  };
  for (size_t i = 0; i < kMaxUnauthenticatedPerHost; ++i) add("127.0.0.1", start + std::chrono::milliseconds(i));
  CHECK(t.make_room("127.0.0.2", true, start) == "");  // another host: nothing to make way for
  CHECK(t.make_room("127.0.0.1", false, start) == "");  // an open node waits for nobody
  const auto now = start + std::chrono::seconds(1);
  CHECK(t.admit("127.0.0.1", true) == "128 of its connections have not authenticated yet");
  CHECK(t.make_room("127.0.0.1", true, now) == "127.0.0.1:1");  // the oldest
  CHECK(t.admit("127.0.0.1", true) == "");
  add("127.0.0.1", now);
  CHECK(t.make_room("127.0.0.1", true, now) == "127.0.0.1:2");
  add("127.0.0.1", now);
  // The doomed ones close at the next sweep, nothing said to them.
  std::vector<std::string> late;
  const auto closed = t.sweep(now, true, std::chrono::seconds(10), &late);
  CHECK(closed == std::vector<Connections::Ep>{ep(1), ep(2)});
  CHECK(late.empty());
  // From many hosts: the oldest of all makes way once 1024 wait.
  Connections all;
  n = 0;
  for (size_t i = 0; i < kMaxUnauthenticated; ++i) {
    ++n;
    all.add(ep(n), "10.1." + std::to_string(i / 100) + ".1:" + std::to_string(n), start + std::chrono::milliseconds(i));
  }
  CHECK(all.make_room("10.2.0.1", true, now) == "10.1.0.1:1");
  CHECK(all.admit("10.2.0.1", true) == "");
}
