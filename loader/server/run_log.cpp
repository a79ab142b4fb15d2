// RunLog: the first run per cargo entry and connection in full, the rest counted and summed.
#include "run_log.h"

#include <cstring>

#include "line.h"

namespace xcargo::loader {

RunLog::RunLog(Sink sink, std::chrono::milliseconds every) : sink_(std::move(sink)), every_(every) {}

RunLog::Tally* RunLog::find(const Run& r) {
  for (Tally& t : tallies_) {
    if (t.origin_ptr != r.origin || t.forward != r.forward || t.entry != r.entry ||
        std::memcmp(t.digest.data(), r.digest->data(), t.digest.size()) != 0)
      continue;
    // The same address may hold another connection's origin by now.
    if (r.origin && (!t.has_origin || t.origin != *r.origin)) continue;
    return &t;
  }
  return nullptr;
}

void RunLog::ran(const Run& r) {
  std::lock_guard<std::mutex> l(mu_);
  if (Tally* t = find(r)) {
    if (t->count == 0) {
      t->since = Clock::now();
      t->hop_min = t->hop_max = r.hop;
    }
    ++t->count;
    (r.forwarded_to >= 0 ? t->forwarded : t->ok)++;
    t->ns_sum += r.kernel_ns;
    t->ns_max = std::max(t->ns_max, r.kernel_ns);
    t->hop_min = std::min(t->hop_min, r.hop);
    t->hop_max = std::max(t->hop_max, r.hop);
    return;
  }
  write_full(r);
  if (tallies_.size() >= kMaxKeys) return;  // every run of a new key then has its full line
  Tally& t = tallies_.emplace_back();
  t.digest = *r.digest;
  t.entry.assign(r.entry);
  t.forward = r.forward;
  t.origin_ptr = r.origin;
  if ((t.has_origin = r.origin != nullptr)) t.origin = *r.origin;
  if ((t.has_signer = r.signed_by != nullptr)) t.signed_by = *r.signed_by;
  t.last_seen = Clock::now();
}

void RunLog::write_full(const Run& r) {
  Line line;
  line.add(r.forward ? "accepted forward: " : "accepted invoke: ").hex(ByteView(*r.digest).first(8)).add("/").add(r.entry);
  if (r.forward) line.add(" hop ").num(r.hop);
  if (r.forwarded_to >= 0) line.add(" -> forwarded to node ").num(uint64_t(r.forwarded_to));
  else line.add(" -> ok");
  line.add(" (").us(r.kernel_ns).add(" us)");
  if (r.signed_by) line.add(", ").add(*r.signed_by);
  if (r.origin) line.add("; ").add(*r.origin);
  sink_(line.view());
}

void RunLog::write_sum(Tally& t, Clock::time_point now) {
  Line line;
  line.add(t.forward ? "accepted forward: " : "accepted invoke: ").hex(ByteView(t.digest).first(8)).add("/").add(t.entry);
  if (t.forward) {
    line.add(" hop").add(t.hop_min == t.hop_max ? " " : "s ").num(t.hop_min);
    if (t.hop_min != t.hop_max) line.add(" to ").num(t.hop_max);
  }
  const auto ms = uint64_t(std::chrono::duration_cast<std::chrono::milliseconds>(now - t.since).count());
  line.add(" -> ").num(t.count).add(t.count == 1 ? " more run" : " more runs").add(" in the last ");
  line.num(ms / 1000).add(".").num(ms / 100 % 10).add(" s: ");
  if (t.ok) line.add("ok ").num(t.ok);
  if (t.ok && t.forwarded) line.add(", ");
  if (t.forwarded) line.add("forwarded ").num(t.forwarded);
  line.add(" (kernel mean ").us2(t.ns_sum / t.count).add(" us, max ").us(t.ns_max).add(" us)");
  if (t.has_signer) line.add(", ").add(t.signed_by);
  if (t.has_origin) line.add("; ").add(t.origin);
  sink_(line.view());
  t.count = t.ok = t.forwarded = t.ns_sum = t.ns_max = 0;
  t.last_seen = now;
}

void RunLog::flush(bool all) {
  std::lock_guard<std::mutex> l(mu_);
  const auto now = Clock::now();
  for (Tally& t : tallies_)
    if (t.count && (all || now - t.since >= every_)) write_sum(t, now);
  std::erase_if(tallies_, [&](const Tally& t) { return !t.count && now - t.last_seen >= kForgetAfter; });
}

size_t RunLog::keys() const {
  std::lock_guard<std::mutex> l(mu_);
  return tallies_.size();
}

}  // namespace xcargo::loader
