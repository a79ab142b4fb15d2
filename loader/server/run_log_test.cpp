// RunLog: the first run of each cargo entry per connection in full, the rest summed; nothing
// counted twice or lost.
#include <catch2/catch.hpp>

#include <atomic>
#include <regex>
#include <thread>

#include "server/run_log.h"

using namespace xcargo;
using namespace xcargo::loader;
using namespace std::chrono_literals;

namespace {
struct Lines {
  std::vector<std::string> v;
  RunLog::Sink sink() {
    return [this](std::string_view l) { v.emplace_back(l); };
  }
};
Digest digest(uint8_t b) {
  Digest d{};
  d.fill(b);
  return d;
}
Run run(const Digest& d, std::string_view entry, const std::string* origin, uint64_t ns = 1500) {
  static const std::string signer = "signed by abcd (k.pub)";
  Run r;
  r.digest = &d;
  r.entry = entry;
  r.origin = origin;
  r.kernel_ns = ns;
  r.signed_by = &signer;
  return r;
}
// The runs a line accounts for: 1 for a full line, N for "N more runs".
uint64_t counted(const std::string& line) {
  std::smatch m;
  if (std::regex_search(line, m, std::regex(R"(-> (\d+) more runs?)"))) return std::stoull(m[1]);
  return 1;
}
// The runs all of the lines account for.
uint64_t counted(const Lines& out) {
  uint64_t n = 0;
  for (const auto& l : out.v) n += counted(l);
  return n;
}
}  // namespace

TEST_CASE("the first run is logged in full, the rest summed at the flush", "[run_log]") {
  Lines out;
  RunLog log(out.sink(), 0ms);
  const Digest d = digest(0xab);
  const std::string who = "from 127.0.0.1:4000 key 1234 (me)";
  for (int i = 0; i < 1000; ++i) log.ran(run(d, "add", &who, 1000 + uint64_t(i)));
  REQUIRE(out.v.size() == 1);
  CHECK(out.v[0] == "accepted invoke: abababababababab/add -> ok (1.0 us), signed by abcd (k.pub); from 127.0.0.1:4000 key 1234 (me)");
  log.flush();
  REQUIRE(out.v.size() == 2);
  CHECK(std::regex_match(out.v[1], std::regex(R"(accepted invoke: abababababababab/add -> 999 more runs in the last \d+\.\d s: ok 999 )"
                                              R"(\(kernel mean 1\.50 us, max 1\.9 us\), signed by abcd \(k\.pub\); from 127\.0\.0\.1:4000 key 1234 \(me\))")));
  log.flush();
  CHECK(out.v.size() == 2);  // nothing pending: no line
  log.ran(run(d, "add", &who));
  CHECK(out.v.size() == 2);  // still known: counted
  log.flush(true);
  CHECK(out.v.size() == 3);
}

TEST_CASE("each connection and each entry has its own first line and sums", "[run_log]") {
  Lines out;
  RunLog log(out.sink(), 0ms);
  const Digest d = digest(1), e = digest(2);
  const std::string a = "from A", b = "from B";
  uint64_t runs = 0;
  for (int i = 0; i < 50; ++i) {
    log.ran(run(d, "add", &a));
    log.ran(run(d, "add", &b));
    log.ran(run(d, "mul", &a));
    log.ran(run(e, "add", &a));
    log.ran(run(d, "add", nullptr));
    runs += 5;
    if (i % 7 == 0) log.flush();
  }
  log.flush(true);
  uint64_t total = 0;
  int full = 0;
  for (const auto& l : out.v) {
    total += counted(l);
    full += l.find(" more run") == std::string::npos;
  }
  CHECK(full == 5);
  CHECK(total == runs);
  CHECK(log.keys() == 5);
}

TEST_CASE("an origin at a reused address is another connection", "[run_log]") {
  Lines out;
  RunLog log(out.sink(), 0ms);
  const Digest d = digest(3);
  std::string who = "from 127.0.0.1:1 key a (x)";
  log.ran(run(d, "add", &who));
  who = "from 127.0.0.1:2 key b (y)";  // same object, another client
  log.ran(run(d, "add", &who));
  REQUIRE(out.v.size() == 2);
  CHECK(out.v[1].find("127.0.0.1:2 key b (y)") != std::string::npos);
}

TEST_CASE("forwards: hops and destinations summed", "[run_log]") {
  Lines out;
  RunLog log(out.sink(), 0ms);
  const Digest d = digest(4);
  const std::string who = "from C";
  for (uint32_t hop = 1; hop <= 10; ++hop) {
    Run r = run(d, "walk", &who);
    r.forward = true;
    r.hop = hop;
    r.forwarded_to = hop < 10 ? int64_t(hop % 2) : -1;
    log.ran(r);
  }
  log.flush(true);
  REQUIRE(out.v.size() == 2);
  CHECK(out.v[0].find("accepted forward: 0404040404040404/walk hop 1 -> forwarded to node 1 (1.5 us)") == 0);
  CHECK(out.v[1].find("accepted forward: 0404040404040404/walk hops 2 to 10 -> 9 more runs in the last ") == 0);
  CHECK(out.v[1].find(": ok 1, forwarded 8 (kernel mean 1.50 us") != std::string::npos);
}

TEST_CASE("sums wait until they are `every` old; idle connections are forgotten", "[run_log]") {
  Lines out;
  RunLog log(out.sink(), 1h);
  const Digest d = digest(5);
  const std::string who = "from D";
  log.ran(run(d, "add", &who));
  log.ran(run(d, "add", &who));
  log.flush();
  CHECK(out.v.size() == 1);  // not an hour old
  log.flush(true);
  CHECK(out.v.size() == 2);
  CHECK(log.keys() == 1);  // seen just now: kept
}

TEST_CASE("past kMaxKeys keys, new ones are logged in full every time", "[run_log]") {
  Lines out;
  RunLog log(out.sink(), 1h);
  const Digest d = digest(6);
  std::vector<std::string> who;
  for (size_t i = 0; i < RunLog::kMaxKeys + 3; ++i) who.push_back("from " + std::to_string(i));
  for (const auto& w : who) log.ran(run(d, "add", &w));
  CHECK(log.keys() == RunLog::kMaxKeys);
  log.ran(run(d, "add", &who.back()));
  CHECK(out.v.size() == RunLog::kMaxKeys + 4);
}

TEST_CASE("runs from several threads are all counted", "[run_log]") {
  Lines out;
  RunLog log(out.sink(), 0ms);
  const Digest d = digest(7);
  const std::string who = "from E";
  std::vector<std::thread> t;
  for (int k = 0; k < 4; ++k)
    t.emplace_back([&] {
      for (int i = 0; i < 2000; ++i) log.ran(run(d, "add", &who));
    });
  for (int i = 0; i < 20; ++i) log.flush();
  for (auto& x : t) x.join();
  log.flush(true);
  CHECK(counted(out) == 8000);
}

TEST_CASE("in a batch: a new key's first run in full at once, the rest summed at its end", "[run_log]") {
  Lines out;
  RunLog log(out.sink(), 0ms);
  const Digest d = digest(8), e = digest(9);
  const std::string who = "from F", other = "from G";
  log.begin_batch();
  for (int i = 0; i < 10; ++i) log.ran(run(d, "add", &who, 2000));
  REQUIRE(out.v.size() == 1);  // the first, before its reply leaves
  CHECK(out.v[0].find("abababab") == std::string::npos);
  CHECK(out.v[0].find("0808080808080808/add -> ok (2.0 us)") != std::string::npos);
  log.flush();
  CHECK(out.v.size() == 1);  // the batch's sums are not in the tally yet (flush(true) takes them)
  // Keys taking turns: each change adds the last key's sums under the lock.
  for (int i = 0; i < 6; ++i) log.ran(run(i % 2 ? e : d, "add", i % 3 ? &who : &other, 1000 * uint64_t(i + 1)));
  log.end_batch();
  const size_t full = out.v.size();
  CHECK(full == 4);  // d/who, then e/who, d/other and e/other, each new: in full
  log.flush(true);
  CHECK(counted(out) == 16);
  for (size_t i = full; i < out.v.size(); ++i)
    if (out.v[i].find("0808080808080808/add") != std::string::npos && out.v[i].find("from F") != std::string::npos)
      CHECK(out.v[i].find("-> 11 more runs") != std::string::npos);  // 9 in the first stretch, 2 later
  // After the batch, runs are counted as before.
  log.ran(run(d, "add", &who));
  log.flush(true);
  CHECK(counted(out.v.back()) == 1);
  CHECK(out.v.back().find("more run ") != std::string::npos);
}

TEST_CASE("a batch on one thread, runs on others: all counted once", "[run_log]") {
  Lines out;
  RunLog log(out.sink(), 0ms);
  const Digest d = digest(10);
  const std::string who = "from H";
  std::thread other([&] {
    for (int i = 0; i < 3000; ++i) log.ran(run(d, "add", &who));
  });
  for (int b = 0; b < 100; ++b) {
    log.begin_batch();
    for (int i = 0; i < 30; ++i) log.ran(run(d, "add", &who));
    log.end_batch();
    if (b % 10 == 0) log.flush();
  }
  other.join();
  log.flush(true);
  CHECK(counted(out) == 6000);
}

TEST_CASE("flush(true) from another thread takes an open batch's sums (its thread stuck in a kernel)", "[run_log]") {
  Lines out;
  RunLog log(out.sink(), 1h);
  const Digest d = digest(11);
  const std::string who = "from I";
  std::atomic<int> step{0};
  std::thread leader([&] {
    log.begin_batch();
    for (int i = 0; i < 30; ++i) log.ran(run(d, "add", &who));
    step = 1;
    while (step != 2) std::this_thread::yield();  // stuck: the batch stays open
    log.ran(run(d, "add", &who));                  // after the flush, still summed once
    log.end_batch();
  });
  while (step != 1) std::this_thread::yield();
  log.flush(true);
  CHECK(counted(out) == 30);
  step = 2;
  leader.join();
  log.flush(true);
  CHECK(counted(out) == 31);
}

TEST_CASE("a batch on another thread does not take the last batch thread's key", "[run_log]") {
  Lines out;
  RunLog log(out.sink(), 0ms);
  const Digest d = digest(12);
  const std::string who = "from J";
  for (int t = 0; t < 3; ++t)
    std::thread([&] {
      log.begin_batch();
      for (int i = 0; i < 10; ++i) log.ran(run(d, "add", &who));
      log.end_batch();
    }).join();
  log.flush(true);
  CHECK(counted(out) == 30);
  CHECK(out.v.size() == 2);  // one full line, one sum
}
