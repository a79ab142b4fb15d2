// Request handling for every message type of the wire protocol, with one log line each.
#include "handler.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "xcargo/version.h"

namespace xcargo::loader {

using namespace wire;

namespace {

// A log line in a fixed buffer; what does not fit is cut.
class Line {
public:
  Line& add(std::string_view s) {
    const size_t k = std::min(s.size(), sizeof buf_ - n_);
    std::memcpy(buf_ + n_, s.data(), k);
    n_ += k;
    return *this;
  }
  Line& hex(ByteView b) {
    static constexpr char kDigits[] = "0123456789abcdef";
    for (uint8_t x : b)
      if (n_ + 2 <= sizeof buf_) buf_[n_++] = kDigits[x >> 4], buf_[n_++] = kDigits[x & 15];
    return *this;
  }
  Line& num(uint64_t v) {
    n_ = size_t(std::to_chars(buf_ + n_, buf_ + sizeof buf_, v).ptr - buf_);
    return *this;
  }
  std::string_view view() const { return {buf_, n_}; }

private:
  char buf_[256];
  size_t n_ = 0;
};

std::string short_digest(const Digest& d) { return to_hex(ByteView(d).first(8)); }
double us_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t).count();
}
}  // namespace

Handler::Handler(Engine& engine, uint64_t max_input, Log log) : engine_(engine), max_input_(max_input), log_(std::move(log)) {}

uint64_t Handler::max_cargo() const { return engine_.config().limits.max_cargo_size; }

Reply Handler::handle(MsgType type, ByteView header, ByteView data) {
  switch (type) {
    case MsgType::hello: return hello(header);
    case MsgType::push: return push(header, data);
    case MsgType::has: return has(header);
    case MsgType::invoke: return invoke(header, data);
    case MsgType::list: return list(header);
    case MsgType::stats: return stats(header);
    default: return bad_request("message type " + std::to_string(int(type)) + " is not a request");
  }
}

Reply Handler::bad_request(const std::string& why) {
  log_("refused request: bad_request: " + why);
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
    r.error_kind = uint16_t(Errc::limit);
    r.message = "cargo of " + std::to_string(p->cargo_size) + " bytes is over this node's limit of " + std::to_string(max_cargo());
    log_("refused push: " + r.message);
    return {MsgType::push_reply, encode(r), {}};
  }
  if (p->cargo_size != data.size()) return bad_request("push: cargo_size does not match the data");
  auto loaded = engine_.load(Bytes(data.begin(), data.end()));
  if (!loaded.ok()) {
    const Error& e = loaded.error();
    r.status = e.code() == Errc::limit ? ReplyStatus::limit : ReplyStatus::refused;
    r.error_kind = uint16_t(e.code());
    r.message = e.message().substr(0, kMaxMessage);
    log_(std::string("refused push: ") + errc_name(e.code()) + ": " + e.message());
    return {MsgType::push_reply, encode(r), {}};
  }
  r.digest = loaded->digest;
  r.variant = loaded->variant;
  r.already_loaded = loaded->already_loaded;
  r.jit_compiled = loaded->jit_compiled;
  r.disk_cache_hit = loaded->disk_cache_hit;
  char line[256];
  std::snprintf(line, sizeof line, "accepted push: %s %s digest %s variant %s%s%s (%.0f us)", loaded->name.c_str(),
                loaded->version.c_str(), short_digest(loaded->digest).c_str(), loaded->variant.c_str(),
                loaded->already_loaded ? ", already loaded" : loaded->jit_compiled ? ", jit compiled" : "",
                loaded->disk_cache_hit ? ", disk cache hit" : "", us_since(t0));
  log_(line);
  return {MsgType::push_reply, encode(r), {}};
}

Reply Handler::has(ByteView header) {
  auto h = decode_has(header);
  if (!h.ok()) return bad_request(h.error().message());
  return {MsgType::has_reply, encode(HasReply{h->request_id, engine_.has(h->digest)}), {}};
}

Reply Handler::invoke(ByteView header, ByteView data) { return *invoke(header, data, false); }

std::optional<Reply> Handler::invoke_if_quick(ByteView header, ByteView data) { return invoke(header, data, true); }

std::optional<Reply> Handler::invoke(ByteView header, ByteView data, bool quick_only) {
  auto inv = decode_invoke(header);
  if (!inv.ok()) return bad_request(inv.error().message());
  ResultMsg r;
  r.request_id = inv->request_id;
  if (inv->input_size > max_input_) {
    r.status = ReplyStatus::limit;
    r.message = "input of " + std::to_string(inv->input_size) + " bytes is over this node's limit of " + std::to_string(max_input_);
    log_("refused invoke: " + r.message);
    return Reply{MsgType::result, encode(r), {}};
  }
  if (inv->input_size != data.size()) return bad_request("invoke: input_size does not match the data");
  std::optional<InvokeResult> res =
      quick_only ? engine_.invoke_if_quick(inv->digest, inv->entry, data) : engine_.invoke(inv->digest, inv->entry, data);
  if (!res) return std::nullopt;
  r.status = res->status;
  r.kernel_return = res->kernel_return;
  r.variant = res->variant;
  r.message = res->message.substr(0, kMaxMessage);
  r.output_size = res->output.size();
  // Every request gets its line, built on the stack: this is the hot path.
  if (res->status == ReplyStatus::ok) {
    const uint64_t ns = res->kernel_ns;
    Line line;
    line.add("accepted invoke: ").hex(ByteView(inv->digest).first(8)).add("/").add(inv->entry).add(" -> ok (");
    line.num(ns / 1000).add(".").num(ns / 100 % 10).add(" us)");
    log_(line.view());
  } else {
    log_("failed invoke: " + short_digest(inv->digest) + "/" + inv->entry + " -> " + status_name(res->status) + ": " +
         res->message);
  }
  return Reply{MsgType::result, encode(r), std::move(res->output)};
}

Reply Handler::list(ByteView header) {
  auto q = decode_request(header);
  if (!q.ok()) return bad_request(q.error().message());
  std::vector<CargoListing> out;
  for (const auto& c : engine_.list())
    out.push_back({c.digest, c.invocations, c.name, c.version, c.variant, c.variants, c.entries});
  return {MsgType::list_reply, encode(RequestOnly{q->request_id}), encode_listing(out)};
}

Reply Handler::stats(ByteView header) {
  auto q = decode_request(header);
  if (!q.ok()) return bad_request(q.error().message());
  const EngineStats s = engine_.stats();
  std::vector<Counter> c = {{"cargos_loaded", s.cargos_loaded}, {"loads_refused", s.loads_refused},
                            {"jit_compiles", s.jit_compiles}, {"disk_cache_hits", s.disk_cache_hits},
                            {"disk_cache_misses", s.disk_cache_misses}, {"disk_cache_corrupt", s.disk_cache_corrupt},
                            {"invocations", s.invocations}, {"invocations_failed", s.invocations_failed}};
  return {MsgType::stats_reply, encode(RequestOnly{q->request_id}), encode_counters(c)};
}

}  // namespace xcargo::loader
