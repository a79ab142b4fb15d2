// RunLog: the first run per cargo entry and connection in full, the rest counted and summed.
#include "server/run_log.h"

#include <algorithm>
#include <cstring>

#include "server/line.h"

namespace xcargo::loader {


void RunLog::Key::set(const Run& r) {
  digest = *r.digest;
  entry.assign(r.entry);
  forward = r.forward;
  origin_ptr = r.origin;
  if ((has_origin = r.origin != nullptr)) origin = *r.origin;
  else origin.clear();
}

bool RunLog::Key::matches(const Run& r) const {
  if (origin_ptr != r.origin || forward != r.forward || entry != r.entry || std::memcmp(digest.data(), r.digest->data(), digest.size()) != 0)
    return false;
  // The same address may hold another connection's origin by now.
  return !r.origin || (has_origin && origin == *r.origin);
}

bool RunLog::Key::matches(const Key& k) const {
  return origin_ptr == k.origin_ptr && forward == k.forward && entry == k.entry && digest == k.digest &&
         has_origin == k.has_origin && origin == k.origin;
}

void RunLog::Sums::add(const Run& r) {
  if (count == 0) hop_min = hop_max = r.hop;
  ++count;
  (r.forwarded_to >= 0 ? forwarded : ok)++;
  ns_sum += r.kernel_ns;
  ns_max = std::max(ns_max, r.kernel_ns);
  hop_min = std::min(hop_min, r.hop);
  hop_max = std::max(hop_max, r.hop);
}

void RunLog::Sums::add(const Sums& s) {
  if (!s.count) return;
  if (count == 0) hop_min = s.hop_min, hop_max = s.hop_max;
  count += s.count;
  ok += s.ok;
  forwarded += s.forwarded;
  ns_sum += s.ns_sum;
  ns_max = std::max(ns_max, s.ns_max);
  hop_min = std::min(hop_min, s.hop_min);
  hop_max = std::max(hop_max, s.hop_max);
}

RunLog::RunLog(Sink sink, std::chrono::milliseconds every) : sink_(std::move(sink)), every_(every) {}

namespace {
template <class T>
void put(std::atomic<T>& a, T v) {  // written by one thread: no locked instruction
  a.store(v, std::memory_order_relaxed);
}
template <class T>
T get(const std::atomic<T>& a) {
  return a.load(std::memory_order_relaxed);
}
}  // namespace

void RunLog::Batch::add(const Run& r) {
  const uint64_t n = get(count);
  if (n == 0) put(hop_min, r.hop), put(hop_max, r.hop);
  put(count, n + 1);
  if (r.forwarded_to >= 0) put(forwarded, get(forwarded) + 1);
  else put(ok, get(ok) + 1);
  put(ns_sum, get(ns_sum) + r.kernel_ns);
  put(ns_max, std::max(get(ns_max), r.kernel_ns));
  put(hop_min, std::min(get(hop_min), r.hop));
  put(hop_max, std::max(get(hop_max), r.hop));
}

RunLog::Sums RunLog::Batch::take() {
  Sums s{get(count), get(ok), get(forwarded), get(ns_sum), get(ns_max), get(hop_min), get(hop_max)};
  put(count, uint64_t(0)), put(ok, uint64_t(0)), put(forwarded, uint64_t(0)), put(ns_sum, uint64_t(0)), put(ns_max, uint64_t(0));
  return s;
}

void RunLog::fold_batch() {
  const Sums s = batch_.take();
  if (batch_.armed) fold(batch_.key, s);
}

void RunLog::ran(const Run& r) {
  const bool mine = get(batch_.thread) == std::this_thread::get_id();
  if (mine && batch_.armed && batch_.forgets == get(forgets_) && batch_.key.matches(r)) return batch_.add(r);
  std::lock_guard<std::mutex> l(mu_);
  if (mine) {
    fold_batch();
    batch_.forgets = get(forgets_);
    if ((batch_.armed = tally(r))) batch_.key.set(r);
    return;
  }
  (void)tally(r);
}

void RunLog::begin_batch() {
  const std::thread::id me = std::this_thread::get_id();
  if (get(batch_.last) != me) {  // another thread's key: not this one's to sum
    std::lock_guard<std::mutex> l(mu_);
    fold_batch();
    batch_.armed = false;
    put(batch_.last, me);
  }
  put(batch_.thread, me);
}

void RunLog::end_batch() {
  if (get(batch_.thread) != std::this_thread::get_id()) return;
  if (get(batch_.count)) {
    std::lock_guard<std::mutex> l(mu_);
    fold_batch();
  }
  put(batch_.thread, std::thread::id());
}

bool RunLog::tally(const Run& r) {
  if (Tally* t = find(r)) {
    if (t->sums.count == 0) t->since = Clock::now();
    t->sums.add(r);
    return true;
  }
  write_full(r);
  if (tallies_.size() >= kMaxKeys) return false;  // every run of a new key then has its full line
  Tally& t = tallies_.emplace_back();
  t.key.set(r);
  if ((t.has_signer = r.signed_by != nullptr)) t.signed_by = *r.signed_by;
  t.last_seen = Clock::now();
  return true;
}

void RunLog::fold(const Key& k, const Sums& s) {
  if (!s.count) return;
  Tally* t = find(k);
  if (!t) {  // forgotten meanwhile (flush: idle for a minute): a tally again, for these sums
    if (tallies_.size() >= kMaxKeys) return;
    t = &tallies_.emplace_back();
    t->key = k;
    t->last_seen = Clock::now();
  }
  if (t->sums.count == 0) t->since = Clock::now();
  t->sums.add(s);
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
  const Key& k = t.key;
  const Sums& n = t.sums;
  line.add(k.forward ? "accepted forward: " : "accepted invoke: ").hex(ByteView(k.digest).first(8)).add("/").add(k.entry);
  if (k.forward) {
    line.add(" hop").add(n.hop_min == n.hop_max ? " " : "s ").num(n.hop_min);
    if (n.hop_min != n.hop_max) line.add(" to ").num(n.hop_max);
  }
  const auto ms = uint64_t(std::chrono::duration_cast<std::chrono::milliseconds>(now - t.since).count());
  line.add(" -> ").num(n.count).add(n.count == 1 ? " more run" : " more runs").add(" in the last ");
  line.num(ms / 1000).add(".").num(ms / 100 % 10).add(" s: ");
  if (n.ok) line.add("ok ").num(n.ok);
  if (n.ok && n.forwarded) line.add(", ");
  if (n.forwarded) line.add("forwarded ").num(n.forwarded);
  line.add(" (kernel mean ").us2(n.ns_sum / n.count).add(" us, max ").us(n.ns_max).add(" us)");
  if (t.has_signer) line.add(", ").add(t.signed_by);
  if (k.has_origin) line.add("; ").add(k.origin);
  sink_(line.view());
  t.sums = {};
  t.last_seen = now;
}

void RunLog::flush(bool all) {
  std::lock_guard<std::mutex> l(mu_);
  if (all) fold_batch();
  const auto now = Clock::now();
  for (Tally& t : tallies_)
    if (t.sums.count && (all || now - t.since >= every_)) write_sum(t, now);
  if (std::erase_if(tallies_, [&](const Tally& t) { return !t.sums.count && now - t.last_seen >= kForgetAfter; }))
    forgets_.fetch_add(1, std::memory_order_relaxed);
}

size_t RunLog::keys() const {
  std::lock_guard<std::mutex> l(mu_);
  return tallies_.size();
}

}  // namespace xcargo::loader
