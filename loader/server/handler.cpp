// Request handling for every message type of the wire protocol, with one log line each.
#include "server/handler.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "server/line.h"
#include "log.h"
#include "common/large_buffers.h"
#include "xcargo/version.h"

namespace xcargo::loader {

using namespace wire;

namespace {

std::string short_digest(const Digest& d) { return to_hex(ByteView(d).first(8)); }
double us_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t).count();
}
}  // namespace

namespace {
// The thread-local behind RequestOrigin, kept in this file: other files reach it only through
// these functions (GCC's cross-file access to a thread_local class member went through a
// null pointer in the sanitizer build).
thread_local const std::string* t_origin = nullptr;
}  // namespace

RequestOrigin::RequestOrigin(const std::string* who) : prev_(t_origin) { t_origin = who; }
RequestOrigin::~RequestOrigin() { t_origin = prev_; }
const std::string* RequestOrigin::current() { return t_origin; }

void Handler::note(std::string line) {
  if (const std::string* who = RequestOrigin::current()) line.append("; ").append(*who);
  log_(line);
}

void Handler::note_request(const std::string& line) { refusals_.line(line, RequestOrigin::current()); }

Handler::Handler(Engine& engine, uint64_t max_input, Log log, uint32_t max_hops, bool every_run)
    : engine_(engine), max_input_(max_input), max_hops_(max_hops), log_(log), runs_(log), refusals_(log), every_run_(every_run) {}

Handler::~Handler() {
  runs_.flush(true);
  refusals_.flush(true);
}

uint64_t Handler::max_cargo() const { return engine_.config().limits.max_cargo_size; }
uint64_t Handler::max_reply() const { return engine_.config().max_reply; }

Reply Handler::handle(MsgType type, ByteView header, ByteView data) {
  switch (type) {
    case MsgType::hello: return hello(header);
    case MsgType::push: return push(header, data);
    case MsgType::has: return has(header);
    case MsgType::invoke: return invoke(header, data);
    case MsgType::list: return list(header);
    case MsgType::stats: return stats(header);
    case MsgType::region: return region(header);
    case MsgType::region_read: return region_read(header);
    default: return bad_request("message type " + std::to_string(int(type)) + " is not a request");
  }
}

std::string Handler::describe(MsgType type, ByteView header) const {
  Digest digest{};
  std::string entry;
  if (type == MsgType::invoke) {
    auto i = decode_invoke(header);
    if (!i.ok()) return "";
    digest = i->digest, entry = i->entry;
  } else if (type == MsgType::forward) {
    auto f = decode_forward(header);
    if (!f.ok()) return "";
    digest = f->digest, entry = f->entry;
  } else {
    return "";
  }
  auto signed_by = engine_.signed_by(digest);
  return "cargo " + short_digest(digest) + "/" + entry + (signed_by ? ", " + *signed_by : "");
}

uint16_t Handler::cargo_label(const Digest& digest, const std::string* name) {
  if (!name) return stats_->label(LabelKind::cargo, "unknown");  // digests nobody pushed do not take slots
  struct Cached {
    const NodeStats* stats = nullptr;
    Digest digest{};
    uint16_t slot = 0;
  };
  thread_local Cached c;
  if (c.stats != stats_ || c.digest != digest) c = {stats_, digest, stats_->label(LabelKind::cargo, short_digest(digest) + " " + *name)};
  return c.slot;
}

uint16_t Handler::client_label() {
  const std::string* origin = RequestOrigin::current();
  if (!origin) return stats_->label(LabelKind::client, "none");
  // "from PEER key KEYID (NAME)": the key; a connection without one is anonymous.
  struct Cached {
    const NodeStats* stats = nullptr;
    const std::string* origin = nullptr;
    size_t at = 0;
    std::string key;
    uint16_t slot = 0;
  };
  thread_local Cached c;
  if (c.stats == stats_ && c.origin == origin && origin->size() >= c.at + c.key.size() && origin->compare(c.at, c.key.size(), c.key) == 0)
    return c.slot;
  const size_t k = origin->find(" key ");
  c.stats = stats_;
  c.origin = origin;
  c.at = k == std::string::npos ? origin->size() : k + 5;
  c.key = origin->substr(c.at, origin->find(' ', c.at) - c.at);
  c.slot = stats_->label(LabelKind::client, c.key.empty() ? "anonymous" : c.key);
  return c.slot;
}

void Handler::count_answer(MsgType type, ByteView header, ReplyStatus status) {
  if (!stats_) return;
  Digest digest{};
  uint64_t in = 0;
  if (type == MsgType::invoke) {
    auto i = decode_invoke(header);
    if (!i.ok()) return;
    digest = i->digest, in = i->input_size;
  } else if (type == MsgType::forward) {
    auto f = decode_forward(header);
    if (!f.ok()) return;
    digest = f->digest, in = f->input_size;
  } else {
    return;
  }
  const std::string* name = nullptr;
  if (status != ReplyStatus::restarting)  // rare: the worker's failure; restarting answers may be many
    for (const auto& c : engine_.list())
      if (c.digest == digest) {
        thread_local std::string found;
        found = c.name;
        name = &found;
      }
  stats_->answered(cargo_label(digest, name), client_label(), status, in, 0);
}

Reply Handler::bad_request(const std::string& why) {
  note_request("refused request: bad_request: " + why);
  ResultMsg r;
  r.status = ReplyStatus::bad_request;
  r.message = why.substr(0, kMaxMessage);
  return {MsgType::result, encode(r), {}};
}

Reply Handler::hello(ByteView header) {
  auto h = decode_hello(header);
  if (!h.ok()) return bad_request(h.error().message());
  HelloReply r;
  r.status = h->min_version <= kVersion && kVersion <= h->max_version ? ReplyStatus::ok : ReplyStatus::unsupported_version;
  r.node_id = engine_.config().node_id;
  r.node_count = engine_.config().node_count;
  r.max_cargo = max_cargo();
  r.max_input = max_input_;
  r.max_reply = engine_.config().max_reply;
  r.loader_version = std::string("xcargo-loader ") + XCARGO_VERSION_STRING;
  return {MsgType::hello_reply, encode(r), {}};
}

Reply Handler::push(ByteView header, ByteView data) {
  auto p = decode_push(header);
  if (!p.ok()) return bad_request(p.error().message());
  PushReply r;
  r.request_id = p->request_id;
  auto t0 = std::chrono::steady_clock::now();
  // Checked first: an oversized cargo's data is never received, so it cannot match.
  if (p->cargo_size > max_cargo()) {
    r.status = ReplyStatus::limit;
    r.error_kind = ErrorKind::limit;
    r.message = "cargo of " + std::to_string(p->cargo_size) + " bytes is over this node's limit of " + std::to_string(max_cargo());
    note_request("refused push: " + r.message);
    return {MsgType::push_reply, encode(r), {}};
  }
  if (p->cargo_size != data.size()) return bad_request("push: cargo_size does not match the data");
  auto loaded = engine_.load(Bytes(data.begin(), data.end()));
  if (!loaded.ok()) {
    const Error& e = loaded.error();
    r.status = e.code() == Errc::limit ? ReplyStatus::limit : ReplyStatus::refused;
    r.error_kind = error_kind_of(e.code());
    r.message = e.message().substr(0, kMaxMessage);
    note_request(std::string("refused push: ") + errc_name(e.code()) + ": " + e.message());
    return {MsgType::push_reply, encode(r), {}};
  }
  r.digest = loaded->digest;
  r.variant = loaded->variant;
  r.already_loaded = loaded->already_loaded;
  r.jit_compiled = loaded->jit_compiled;
  r.disk_cache_hit = loaded->disk_cache_hit;
  char line[384];
  std::snprintf(line, sizeof line, "accepted push: %s %s digest %s variant %s%s%s (%.0f us: verify %.0f, object %.0f, link %.0f)",
                loaded->name.c_str(), log_word(loaded->version).c_str(), short_digest(loaded->digest).c_str(), loaded->variant.c_str(),
                loaded->already_loaded ? ", already loaded" : !loaded->jit_compiled ? "" : loaded->quick_tier ? ", jit compiled (quick tier; -O2 follows)" : ", jit compiled",
                loaded->disk_cache_hit ? ", disk cache hit" : "", us_since(t0), loaded->verify_ms * 1000,
                loaded->object_ms * 1000, loaded->link_ms * 1000);
  note(std::string(line) + (loaded->signed_by ? ", " + *loaded->signed_by : ""));
  flush_log();  // written before any of the cargo's code can run (and could stop the flusher)
  return {MsgType::push_reply, encode(r), {}};
}

void Handler::tier_up(bool ready) {
  for (const TierUpReport& r : engine_.tier_up(ready)) {
    const std::string what = r.name + " " + log_word(r.version) + " digest " + short_digest(r.digest) + " variant " + r.variant;
    if (!r.error.empty()) {
      log_("tier-up failed: " + what + ": " + r.error + "; its entries keep running the quick tier's code");
      continue;
    }
    char line[384];
    std::snprintf(line, sizeof line, "tiered up: %s: its entries run code compiled at -O2 now (object %.0f us%s, link %.0f us)",
                  what.c_str(), r.object_ms * 1000, r.disk_cache_hit ? " from the disk cache" : "", r.link_ms * 1000);
    log_(line);
  }
}

Reply Handler::has(ByteView header) {
  auto h = decode_has(header);
  if (!h.ok()) return bad_request(h.error().message());
  return {MsgType::has_reply, encode(HasReply{h->request_id, engine_.has(h->digest)}), {}};
}

Reply Handler::invoke(ByteView header, ByteView data) {
  std::optional<Step> step = invoke(header, data, {}, false);
  if (step->forward) return bad_request("the kernel forwarded, but this loader is not in a cluster");
  return std::move(step->reply);
}

namespace {

// The last invoke header this thread decoded, all but its request id, and what it said: a
// client calling one kernel again sends the same bytes after a new id, decoded once (the
// decode took about 55 ns of a warm invocation's 0.8 us over shm).
struct LastInvoke {
  Bytes rest;
  Invoke inv;
};
thread_local LastInvoke t_last_invoke;

// header decoded, or null with *error set; good until this thread's next call.
const Invoke* decoded_invoke(ByteView header, std::optional<Error>* error) {
  LastInvoke& l = t_last_invoke;
  if (header.size() > 8 && header.size() - 8 == l.rest.size() && std::memcmp(header.data() + 8, l.rest.data(), l.rest.size()) == 0) {
    l.inv.request_id = *leading_request_id(MsgType::invoke, header);  // the id leads the header
    return &l.inv;
  }
  auto inv = decode_invoke(header);
  l.rest.clear();  // nothing remembered while l.inv changes
  if (!inv.ok()) {
    *error = inv.error();
    return nullptr;
  }
  l.inv = std::move(*inv);
  l.rest.assign(header.begin() + 8, header.end());
  return &l.inv;
}

// The same for forwards, whose headers from one chain differ in their hop too (wire-protocol.md
// 4.9: request id u64, digest, hop u32, the rest): remembered without the id and the hop (the
// decode, with its copies of the entry and the client's address, takes about 220 of the 1800
// cycles a forward hop spends in a worker, counted with rdtsc).
struct LastForward {
  Bytes bytes;  // the header, its id and hop zero
  Forward f;
};
thread_local LastForward t_last_forward;
constexpr size_t kForwardHop = 40;  // where the hop is in a forward's header

const Forward* decoded_forward(ByteView header, std::optional<Error>* error) {
  LastForward& l = t_last_forward;
  const size_t n = header.size();
  if (n == l.bytes.size() && n > kForwardHop + 4 &&
      std::memcmp(header.data() + 8, l.bytes.data() + 8, kForwardHop - 8) == 0 &&
      std::memcmp(header.data() + kForwardHop + 4, l.bytes.data() + kForwardHop + 4, n - kForwardHop - 4) == 0) {
    uint32_t hop;
    std::memcpy(&hop, header.data() + kForwardHop, 4);  // little-endian, as the wire
    if (hop != 0) {  // else decoded (and refused) below
      l.f.request_id = *leading_request_id(MsgType::forward, header);
      l.f.hop = hop;
      return &l.f;
    }
  }
  auto f = decode_forward(header);
  l.bytes.clear();  // nothing remembered while l.f changes
  if (!f.ok()) {
    *error = f.error();
    return nullptr;
  }
  l.f = std::move(*f);
  l.bytes.assign(header.begin(), header.end());
  std::memset(l.bytes.data(), 0, 8);
  std::memset(l.bytes.data() + kForwardHop, 0, 4);
  return &l.f;
}

}  // namespace

std::optional<Step> Handler::invoke(ByteView header, ByteView data, ByteView reply_address, bool quick_only, Bytes* owned) {
  std::optional<Error> error;
  const Invoke* inv = decoded_invoke(header, &error);
  if (!inv) return Step{bad_request(error->message())};
  if (inv->input_size > max_input_) {  // its data was never fetched: answer from the header
    ResultMsg r;
    r.request_id = inv->request_id;
    r.node_id = engine_.config().node_id;
    r.status = ReplyStatus::limit;
    r.message = "input of " + std::to_string(inv->input_size) + " bytes is over this node's limit of " + std::to_string(max_input_);
    note_request("refused invoke: " + r.message);
    return Step{{MsgType::result, encode(r), {}}};
  }
  if (inv->input_size != data.size()) return Step{bad_request("invoke: input_size does not match the data")};
  return run(inv->request_id, inv->digest, inv->entry, data, 0, reply_address, quick_only, owned, (inv->flags & kInvokeLog) != 0);
}

std::optional<Step> Handler::forward(ByteView header, ByteView data, bool quick_only, Bytes* owned) {
  std::optional<Error> error;
  const Forward* f = decoded_forward(header, &error);
  if (!f) {  // from a peer that does not speak the protocol: nobody to answer
    note_request("refused forward: " + error->message());
    return Step{{}, {}, false};
  }
  if (data.size() != f->cargo_size + f->input_size) {
    note_request("refused forward: cargo_size and input_size do not match the data");
    return Step{{}, {}, false};
  }
  auto fail = [&](ReplyStatus status, const std::string& why) {
    note_request("refused forward: " + short_digest(f->digest) + "/" + f->entry + " hop " + std::to_string(f->hop) + " from node " +
         std::to_string(f->from_node) + ": " + why);
    ResultMsg r;
    r.request_id = f->request_id;
    r.status = status;
    r.node_id = engine_.config().node_id;
    r.hops = f->hop;
    r.message = why.substr(0, kMaxMessage);
    return Step{{MsgType::result, encode(r), {}}, f->reply_address};
  };
  if (f->hop > max_hops_)
    return fail(ReplyStatus::hop_limit, "the computation was forwarded " + std::to_string(f->hop) +
                                            " times, past this node's limit of " + std::to_string(max_hops_) + " hops");
  if (f->cargo_size > 0 && !engine_.has(f->digest)) {
    if (quick_only) return std::nullopt;  // loading is not quick
    auto loaded = engine_.load(Bytes(data.begin(), data.begin() + f->cargo_size));
    if (!loaded.ok())
      return fail(loaded.error().code() == Errc::limit ? ReplyStatus::limit : ReplyStatus::refused,
                  "the forwarded cargo was refused: " + loaded.error().message());
    if (loaded->digest != f->digest)
      return fail(ReplyStatus::refused, "the forwarded cargo is not the one its digest names (it is " +
                                            short_digest(loaded->digest) + ")");
    note("accepted forwarded cargo: " + loaded->name + " " + log_word(loaded->version) + " digest " + short_digest(loaded->digest) +
         " variant " + loaded->variant + " from node " + std::to_string(f->from_node) +
         (loaded->signed_by ? ", " + *loaded->signed_by : ""));
    flush_log();  // as for a push
  }
  auto step = run(f->request_id, f->digest, f->entry, data.subspan(f->cargo_size), f->hop, f->reply_address, quick_only, owned);
  if (step) step->came_from = f->from_node;
  return step;
}

std::optional<Step> Handler::run(uint64_t request_id, const Digest& digest, const std::string& entry, ByteView input,
                                 uint32_t hop, ByteView reply_address, bool quick_only, Bytes* owned, bool keep_log) {
  ResultMsg r;
  r.request_id = request_id;
  r.node_id = engine_.config().node_id;
  r.hops = hop;
  // Where the result goes: a forward's client, by its address (copied only for a result).
  auto reply_to = [&] { return hop ? Bytes(reply_address.begin(), reply_address.end()) : Bytes(); };
  const char* what = hop ? "forward: " : "invoke: ";
  if (input.size() > max_input_) {
    r.status = ReplyStatus::limit;
    r.message = "input of " + std::to_string(input.size()) + " bytes is over this node's limit of " + std::to_string(max_input_);
    note_request(std::string("refused ") + what + r.message);
    if (stats_) stats_->answered(cargo_label(digest, nullptr), client_label(), r.status, input.size(), 0);
    return Step{{MsgType::result, encode(r), {}}, reply_to()};
  }
  if (stats_) stats_->kernel_started();
  std::optional<InvokeResult> res =
      quick_only ? engine_.invoke_if_quick(digest, entry, input, keep_log) : engine_.invoke(digest, entry, input, keep_log);
  if (stats_) stats_->kernel_ended();
  if (!res) return std::nullopt;
  if (const size_t n = res->reply_from_input) {  // the kernel replied with its input (or a prefix)
    // Only a buffer the reply fills at least half of: an unread reply is charged by its size
    // (in_flight.h), and a short prefix must not hold a large input (a 64 KiB prefix of a
    // 64 MiB input would hold 1024 times its charge). Guarded by handler_test.cpp, "a reply
    // that is the kernel's own input is sent from the input's buffer" ("a prefix under half").
    if (owned && owned->data() == input.data() && n >= owned->capacity() / 2) {
      give_spare(std::move(res->output));
      res->output = std::move(*owned);
      res->output.resize(n);
    } else {
      append_large(res->output, input.data(), n);
    }
  }
  if (res->forward && reply_address.empty()) {
    res->status = ReplyStatus::unreachable;
    res->message = "the kernel forwarded the computation, but the client gave no address for its result";
    res->forward.reset();
  }
  if (res->status == ReplyStatus::ok) {  // the hot path: counted, not formatted (RunLog)
    Run run;
    run.forward = hop != 0;
    run.digest = &digest;
    run.entry = entry;
    run.hop = hop;
    run.forwarded_to = res->forward ? int64_t(res->forward->node) : -1;
    run.kernel_ns = res->kernel_ns;
    run.signed_by = res->signed_by;
    run.origin = RequestOrigin::current();
    if (every_run_) runs_.write_full(run);
    else runs_.ran(run);
  } else {
    note_request(std::string("failed ") + what + short_digest(digest) + "/" + entry + " -> " + status_name(res->status) + ": " +
         res->message + (res->signed_by ? " (" + *res->signed_by + ")" : ""));
  }
  if (stats_)
    stats_->answered(cargo_label(digest, res->cargo_name), client_label(), res->status, input.size(),
                     res->forward ? 0 : res->output.size());
  if (res->forward) {
    Step s;
    s.send_reply = false;
    s.forward_node = res->forward->node;
    Bytes address = take_spare();  // a buffer an earlier forward gave back (UcxServer::deliver)
    address.assign(reply_address.begin(), reply_address.end());
    s.forward = Forward{request_id, digest, hop + 1, engine_.config().node_id, 0, res->forward->input.size(),
                        std::move(res->forward->entry), std::move(address)};
    s.forward_input = std::move(res->forward->input);
    s.ended_ns = res->ended_ns;
    return s;
  }
  r.status = res->status;
  r.kernel_return = res->kernel_return;
  r.variant = res->variant;
  r.message = res->message.substr(0, kMaxMessage);
  r.log = std::move(res->log);
  r.log_dropped = uint16_t(std::min<uint32_t>(res->log_dropped, UINT16_MAX));
  r.output_size = res->output.size();
  r.kernel_ns = res->kernel_ns;
  thread_local ResultEncoder results;
  Bytes header = take_spare();  // given back once sent
  results.encode(r, header);
  Step s{{MsgType::result, std::move(header), std::move(res->output)}, reply_to()};
  s.ended_ns = res->ended_ns;
  return s;
}

Reply Handler::list(ByteView header) {
  auto q = decode_request(header);
  if (!q.ok()) return bad_request(q.error().message());
  Listing out;
  const StatsSnapshot n = stats_ ? stats_->snapshot() : StatsSnapshot{};
  for (const auto& c : engine_.list()) {
    uint64_t invocations = c.invocations;  // this worker's runs; the node's answers if it counts them
    const std::string key = short_digest(c.digest) + " ";
    for (const LabelCounts& l : n.cargos)
      if (l.value.compare(0, key.size(), key) == 0) invocations = l.counts.invocations;
    out.cargos.push_back({c.digest, invocations, c.name, c.version, c.variant, c.variants, c.entries});
  }
  for (const auto& [name, length] : engine_.regions().list()) out.regions.push_back({name, length});
  out.triple = engine_.host().triple.substr(0, kMaxName);
  out.cpu = engine_.host().cpu.substr(0, kMaxName);
  out.prefer = engine_.config().prefer == Prefer::bitcode ? "bitcode" : "native";
  return {MsgType::list_reply, encode(RequestOnly{q->request_id}), encode_listing(out)};
}

Reply Handler::region(ByteView header) {
  auto q = decode_region(header);
  if (!q.ok()) return bad_request(q.error().message());
  RegionReply r;
  r.request_id = q->request_id;
  if (const Region* reg = engine_.regions().find(q->name)) r.length = reg->length;
  else r.status = ReplyStatus::no_region;
  return {MsgType::region_reply, encode(r), {}};
}

Reply Handler::region_read(ByteView header) {
  auto q = decode_region_read(header);
  if (!q.ok()) return bad_request(q.error().message());
  RegionData r;
  r.request_id = q->request_id;
  const Region* reg = engine_.regions().find(q->name);
  if (!reg) {
    r.status = ReplyStatus::no_region;
  } else if (q->offset > reg->length || q->length > reg->length - q->offset) {
    r.status = ReplyStatus::out_of_range;
    Line l;
    l.add("refused region read: '").add(q->name).add("' bytes ").num(q->offset).add("+").num(q->length)
        .add(" are not inside its ").num(reg->length);
    note_request(std::string(l.view()));
  } else if (q->length > engine_.config().max_reply) {
    r.status = ReplyStatus::limit;
  } else {
    r.length = q->length;
    return {MsgType::region_data, encode(r), Bytes(reg->base + q->offset, reg->base + q->offset + q->length)};
  }
  return {MsgType::region_data, encode(r), {}};
}

Reply Handler::stats(ByteView header) {
  auto q = decode_request(header);
  if (!q.ok()) return bad_request(q.error().message());
  const EngineStats s = engine_.stats();
  std::vector<Counter> c = {{"cargos_loaded", s.cargos_loaded}, {"loads_refused", s.loads_refused},
                            {"jit_compiles", s.jit_compiles}, {"disk_cache_hits", s.disk_cache_hits},
                            {"disk_cache_misses", s.disk_cache_misses}, {"disk_cache_corrupt", s.disk_cache_corrupt},
                            {"invocations", s.invocations}, {"invocations_failed", s.invocations_failed}};
  if (stats_) {  // the node's counts, kept across workers (this worker's alone above otherwise)
    const StatsSnapshot n = stats_->snapshot();
    c[6].value = n.total.invocations;
    c[7].value = n.total.failed();
    timespec ts{};
    ::clock_gettime(CLOCK_REALTIME, &ts);
    const double now = double(ts.tv_sec) + ts.tv_nsec / 1e9;
    c.push_back({"kernel_crashes", n.total.by_status[size_t(ReplyStatus::crashed)]});
    c.push_back({"kernel_timeouts", n.total.by_status[size_t(ReplyStatus::timeout)]});
    c.push_back({"worker_restarts", n.worker_restarts});
    c.push_back({"uptime_s", uint64_t(now > n.started_unix_s ? now - n.started_unix_s : 0)});
    c.push_back({"invocations_in_flight", n.running});
    c.push_back({"input_bytes", n.total.bytes_in});
    c.push_back({"output_bytes", n.total.bytes_out});
    for (size_t i = 1; i < kStatusKinds; ++i)
      if (n.total.by_status[i]) c.push_back({std::string("failed_") + status_name(ReplyStatus(i)), n.total.by_status[i]});
  }
  if (transport_counters_)
    for (Counter& t : transport_counters_()) c.push_back(std::move(t));
  return {MsgType::stats_reply, encode(RequestOnly{q->request_id}), encode_counters(c)};
}

}  // namespace xcargo::loader
