// The audit trail's lines about floods, at a rate a log can keep: LineLimit for single
// refused or failed requests, Tally for events counted rather than described.
//
// LineLimit: the audit trail's lines about single refused or failed requests, at a rate a
// log can keep. A client can send such requests by the hundred thousand a second through
// a lane: a line each is tens of MB of log a second, enough to rotate every earlier line out
// of both files (guarded by tests/e2e/boundary_test.sh, the lane attack's flood: at most 1000
// lines, every refusal counted; and line_limit_test.cpp, [line_limit]). Per origin (the
// connection's "from PEER key ..."), the first kBurst lines are written at once, then
// kPerSecond; the others are counted, and one line per origin and second sums them up with
// the text of the last one:
//   refused invoke: ... (412345 more such lines from this origin in the last 1.0 s were not
//   written one by one: the log's limit for refused and failed requests); from ...
// Nothing is lost but the wording of each line: every refusal is counted, with its origin.
// All origins together write at most kBurstAll lines, then kPerSecondAll.
// Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

namespace xcargo::loader {

class LineLimit {
public:
  using Sink = std::function<void(std::string_view)>;
  using Clock = std::chrono::steady_clock;
  explicit LineLimit(Sink sink) : sink_(std::move(sink)) {}
  // text: what happened; origin: who asked (appended as "; ORIGIN"), or null.
  void line(const std::string& text, const std::string* origin, Clock::time_point now = Clock::now());
  // Writes the sums a second old (all: every one); forgets origins quiet for a minute.
  void flush(bool all = false, Clock::time_point now = Clock::now());
  size_t origins() const;

  static constexpr double kBurst = 100, kPerSecond = 20;
  // Over all origins, the sums included: many origins (a host has all of 127.0.0.0/8, an
  // IPv6 host a prefix) cannot write more than this between them. Past it their lines are
  // counted in their origins' sums, written as the allowance comes back.
  static constexpr double kBurstAll = 1000, kPerSecondAll = 100;
  static constexpr size_t kMaxOrigins = 1024;  // past this, new origins share one allowance
  static constexpr std::chrono::seconds kForgetAfter{60};

private:
  struct Allowance {
    double tokens = kBurst;
    Clock::time_point refilled{}, since{};  // since: the first line not written
    uint64_t held = 0;                      // lines not written since then
    std::string last;                       // the last of them, in full
  };
  mutable std::mutex mu_;
  std::map<std::string, Allowance> by_origin_;
  double all_tokens_ = kBurstAll;
  Clock::time_point all_refilled_{};
  bool take_all(Clock::time_point now);  // one of all origins' tokens, if there is one (mu_ held)
  Sink sink_;
};

// Tally: how many events of one kind (messages dropped unanswered, refused connections),
// with a line due on the first and then at most once a second, giving the count so far.
// A line per fixed number of events does not bound the log: through a shared-memory lane a
// client can send millions of messages a second (near 1 MB of log a second at one line in
// 1000), so the bound is in time. Not thread-safe: one per thread that counts (the leader).
class Tally {
public:
  using Clock = std::chrono::steady_clock;
  bool due(Clock::time_point now = Clock::now()) {
    if (count_++ != 0 && now - last_ < std::chrono::seconds(1)) return false;
    last_ = now;
    return true;
  }
  uint64_t count() const { return count_; }

private:
  uint64_t count_ = 0;
  Clock::time_point last_{};
};

}  // namespace xcargo::loader
