// LineLimit: refused and failed requests' lines at a rate the log can keep (line_limit.h).
#include "server/line_limit.h"

#include <algorithm>
#include <vector>

namespace xcargo::loader {

void LineLimit::line(const std::string& text, const std::string* origin, Clock::time_point now) {
  std::string full = text;
  if (origin) full.append("; ").append(*origin);
  {
    std::lock_guard<std::mutex> l(mu_);
    std::string key = origin ? *origin : std::string();
    if (by_origin_.size() >= kMaxOrigins && !by_origin_.count(key)) key = "(others)";
    auto [it, fresh] = by_origin_.try_emplace(std::move(key));
    Allowance& a = it->second;
    if (fresh) a.refilled = now;
    a.tokens = std::min(kBurst, a.tokens + std::chrono::duration<double>(now - a.refilled).count() * kPerSecond);
    a.refilled = now;
    if (a.tokens < 1 || !take_all(now)) {
      if (a.held++ == 0) a.since = now;
      a.last = std::move(full);
      return;
    }
    a.tokens -= 1;
  }
  sink_(full);
}

void LineLimit::flush(bool all, Clock::time_point now) {
  std::vector<std::string> lines;
  {
    std::lock_guard<std::mutex> l(mu_);
    for (auto it = by_origin_.begin(); it != by_origin_.end();) {
      Allowance& a = it->second;
      if (a.held && (all || (now - a.since >= std::chrono::seconds(1) && take_all(now)))) {
        char span[32];
        std::snprintf(span, sizeof span, "%.1f", std::chrono::duration<double>(now - a.since).count());
        // The last line's text, then the count, before its origin.
        std::string last = a.last;
        const std::string suffix = it->first.empty() || it->first == "(others)" ? std::string() : "; " + it->first;
        if (!suffix.empty() && last.size() >= suffix.size() && last.compare(last.size() - suffix.size(), suffix.size(), suffix) == 0)
          last.resize(last.size() - suffix.size());
        lines.push_back(last + " (" + std::to_string(a.held) + " more such lines" +
                        (it->first == "(others)" ? " from other connections" : "") + " in the last " + span +
                        " s were not written one by one: the log's limit for refused and failed requests)" + suffix);
        a.held = 0;
        a.last.clear();
      }
      if (!a.held && now - a.refilled > kForgetAfter) it = by_origin_.erase(it);
      else ++it;
    }
  }
  for (const std::string& l : lines) sink_(l);
}

bool LineLimit::take_all(Clock::time_point now) {
  if (all_refilled_ == Clock::time_point{}) all_refilled_ = now;
  if (now > all_refilled_) {  // callers' clocks are read before the lock: one may be a little behind
    all_tokens_ = std::min(kBurstAll, all_tokens_ + std::chrono::duration<double>(now - all_refilled_).count() * kPerSecondAll);
    all_refilled_ = now;
  }
  if (all_tokens_ < 1) return false;
  all_tokens_ -= 1;
  return true;
}

size_t LineLimit::origins() const {
  std::lock_guard<std::mutex> l(mu_);
  return by_origin_.size();
}

}  // namespace xcargo::loader
