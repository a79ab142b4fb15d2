// LineLimit: a flood of refusals from one connection is summed up, others' lines still come.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "server/line_limit.h"

using namespace xcargo::loader;
using Clock = LineLimit::Clock;

TEST_CASE("a flood from one origin is written up to its allowance, then summed up once a second", "[line_limit]") {
  std::vector<std::string> out;
  LineLimit lim([&](std::string_view l) { out.emplace_back(l); });
  const std::string flooder = "from 127.0.0.1:5 key aa", other = "from 127.0.0.1:6 key bb";
  const auto t0 = Clock::now();
  for (int i = 0; i < 100000; ++i) lim.line("refused invoke: #" + std::to_string(i), &flooder, t0);
  CHECK(out.size() == size_t(LineLimit::kBurst));
  CHECK(out.front() == "refused invoke: #0; " + flooder);
  lim.line("failed invoke: x", &other, t0);  // another connection is not held up by the flood
  CHECK(out.back() == "failed invoke: x; " + other);
  lim.flush(false, t0 + std::chrono::milliseconds(500));  // not a second yet
  CHECK(out.size() == size_t(LineLimit::kBurst) + 1);
  lim.flush(false, t0 + std::chrono::seconds(1));
  REQUIRE(out.size() == size_t(LineLimit::kBurst) + 2);
  CHECK(out.back() == "refused invoke: #99999 (99900 more such lines in the last 1.0 s were not written one by one: "
                      "the log's limit for refused and failed requests); " + flooder);
  // Refilled at kPerSecond: after 1 s, 20 more lines are written one by one.
  out.clear();
  for (int i = 0; i < 50; ++i) lim.line("refused invoke: again", &flooder, t0 + std::chrono::seconds(1));
  CHECK(out.size() == size_t(LineLimit::kPerSecond));
  lim.flush(true, t0 + std::chrono::seconds(1));
  CHECK(out.back().find("(30 more such lines") != std::string::npos);
}

TEST_CASE("origins are forgotten when quiet, and bounded in number", "[line_limit]") {
  std::vector<std::string> out;
  LineLimit lim([&](std::string_view l) { out.emplace_back(l); });
  const auto t0 = Clock::now();
  for (size_t i = 0; i < LineLimit::kMaxOrigins + 50; ++i) {
    const std::string o = "from 10.0.0.1:" + std::to_string(i);
    lim.line("refused request: bad_request: x", &o, t0);
  }
  CHECK(lim.origins() == LineLimit::kMaxOrigins + 1);  // the rest share one allowance
  CHECK(out.size() == size_t(LineLimit::kBurstAll));   // each had lines to spare, but not all origins together
  lim.flush(false, t0 + LineLimit::kForgetAfter + std::chrono::seconds(1));
  CHECK(lim.origins() == 0);
  lim.line("refused request: bad_request: y", nullptr, t0);
  CHECK(out.back() == "refused request: bad_request: y");
}

TEST_CASE("many origins together write no more than the allowance of all, and their sums follow", "[line_limit]") {
  std::vector<std::string> out;
  LineLimit lim([&](std::string_view l) { out.emplace_back(l); });
  const auto t0 = Clock::now();
  // 200 loopback addresses, each a host of its own for the front door, 50 junk connections each.
  for (int i = 0; i < 50; ++i)
    for (int h = 0; h < 200; ++h) {
      const std::string o = "127.0." + std::to_string(h) + ".1";
      lim.line("refused a TLS connection from " + o + ":9: junk", &o, t0);
    }
  CHECK(out.size() == size_t(LineLimit::kBurstAll));
  // A second later, kPerSecondAll more lines: the sums of as many origins.
  lim.flush(false, t0 + std::chrono::seconds(1));
  CHECK(out.size() == size_t(LineLimit::kBurstAll + LineLimit::kPerSecondAll));
  CHECK(out.back().find("more such lines") != std::string::npos);
  // Every line is counted: at the end, the rest of the sums.
  lim.flush(true, t0 + std::chrono::seconds(1));
  uint64_t counted = 0;
  for (const std::string& l : out) {
    const size_t at = l.find(" (");
    counted += at == std::string::npos || l.find("more such lines") == std::string::npos ? 1 : std::stoull(l.substr(at + 2));
  }
  CHECK(counted == 50 * 200);
}

TEST_CASE("a tally's line is due on the first event, then at most once a second", "[line_limit]") {
  Tally t;
  const auto t0 = Tally::Clock::now();
  int due = 0;
  for (int i = 0; i < 1000000; ++i) due += t.due(t0 + std::chrono::microseconds(i));  // a million in 1 s
  CHECK(due == 1);
  CHECK(t.count() == 1000000);
  CHECK(t.due(t0 + std::chrono::seconds(1)));
  CHECK_FALSE(t.due(t0 + std::chrono::milliseconds(1999)));
  CHECK(t.due(t0 + std::chrono::seconds(2)));
  CHECK(t.count() == 1000003);
}
