// The protocol's client half over any transport that can do one request/reply roundtrip.
#include "client/session.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <deque>
#include <unordered_map>

#include "auth/auth.h"
#include "common/large_buffers.h"
#include "common/le.h"
#include "xcargo/identity.h"
#include "xcargo/interrupt.h"

namespace xcargo::client {

using namespace wire;

namespace {

// Decodes a reply header and checks that it answers request `id` (the peer's name only
// for errors: it is a string made on each call).
template <class Decode>
auto decode_reply(const Connection& c, ByteView header, uint64_t id, Decode decode) -> decltype(decode(header)) {
  auto r = decode(header);
  if (!r.ok()) return Error(Errc::malformed, c.peer() + ": " + r.error().message());
  if (r->request_id != id) return Error(Errc::malformed, c.peer() + ": reply to another request");
  return r;
}

// A pipelined batch's invocations in flight: request id -> index. Ids are sent in sequence,
// so each has a place in a ring (no allocation); one whose place an older one still holds
// (answered late) goes into a map. Ids are never 0 (first_request_id).
class InFlight {
public:
  explicit InFlight(size_t window) : ring_(std::bit_ceil(std::clamp<size_t>(2 * window, 16, 4096))) {}
  void add(uint64_t id, size_t index) {
    Slot& s = ring_[id & (ring_.size() - 1)];
    if (s.id == 0) s = {id, index};
    else late_.emplace(id, index);
    ++n_;
  }
  std::optional<size_t> take(uint64_t id) {
    if (id == 0) return std::nullopt;  // no request's (a node's bad_request answers with 0): not an empty place's
    if (Slot& s = ring_[id & (ring_.size() - 1)]; s.id == id) {
      s.id = 0;
      --n_;
      return s.index;
    }
    const auto it = late_.find(id);
    if (it == late_.end()) return std::nullopt;
    const size_t index = it->second;
    late_.erase(it);
    --n_;
    return index;
  }
  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  void clear() {
    for (Slot& s : ring_) s.id = 0;
    late_.clear();
    n_ = 0;
  }
  template <class F>
  void each(F f) const {
    for (const Slot& s : ring_)
      if (s.id) f(s.index);
    for (const auto& [id, index] : late_) f(index);
  }

private:
  struct Slot {
    uint64_t id = 0;
    size_t index = 0;
  };
  std::vector<Slot> ring_;
  std::unordered_map<uint64_t, size_t> late_;
  size_t n_ = 0;
};

}  // namespace

uint64_t Session::first_request_id() {
  uint64_t id = 0;
  if (auto n = auth::random_nonce(); n.ok()) std::memcpy(&id, n->data(), sizeof id);
  return id >> 1 | 1;  // never 0, and far from wrapping
}

Result<Frame> Session::request(MsgType type, MsgType reply_type, ByteView header, ByteView data) {
  for (int resent = 0;; ++resent) {
    ByteView h = header;
    if (token_) {  // sealed into a buffer kept for the next request (sealed again after a reconnect)
      sealed_.assign(header.begin(), header.end());
      sealed_.insert(sealed_.end(), token_->begin(), token_->end());
      h = sealed_;
    }
    if (type != MsgType::hello && type != MsgType::auth && lost_before_sending()) {
      XC_TRY(reconnect());
      continue;  // sealed again with the new session's token
    }
    auto f = roundtrip(type, h, data);
    if (!f.ok() && resent < kResends && type != MsgType::hello && type != MsgType::auth) {
      // The node marked it as never read before it ended (wire-protocol.md 8.4): it did not
      // run, and goes to a new connection as after `restarting`.
      const std::vector<uint64_t> unread = never_read();
      const auto id = leading_request_id(type, header);
      if (id && std::find(unread.begin(), unread.end(), *id) != unread.end()) {
        XC_TRY(reconnect());
        continue;
      }
    }
    XC_TRY(f);
    if (f->type == MsgType::result && type != MsgType::hello && type != MsgType::auth &&
        result_status(f->header) == uint16_t(ReplyStatus::restarting)) {  // decoded in full only then
      auto r = decode_result(f->header);
      if (r.ok() && r->status == ReplyStatus::restarting) {
        if (resent == kResends)
          return Error(Errc::unreachable, peer() + ": the node answered 'restarting' " + std::to_string(kResends + 1) +
                                              " times in a row: " + r->message)
              .hint("its kernels keep failing; its log says which");
        XC_TRY(reconnect());
        continue;
      }
    }
    if (f->type == MsgType::result && reply_type != MsgType::result) {
      // A node that cannot parse a request answers with a result carrying bad_request.
      auto r = decode_result(f->header);
      if (r.ok() && r->status == ReplyStatus::unauthenticated) return denied(r->message);
      std::string why = r.ok() ? r->message : "unexpected reply";
      return Error(Errc::malformed, peer() + ": the node refused the request: " + why);
    }
    if (f->type != reply_type)
      return Error(Errc::malformed, peer() + ": protocol error: expected reply type " + std::to_string(int(reply_type)) +
                                        ", got " + std::to_string(int(f->type)));
    return f;
  }
}

Status Session::reconnect() {
  return Error(Errc::unreachable, peer() + ": the node is replacing its worker, and this connection cannot reconnect");
}

Error Session::denied(const std::string& why) const {
  Error e(Errc::unauthenticated, peer() + ": " + why);
  if (identity_id_.empty()) e.hint("pass --identity KEY or set XCARGO_IDENTITY=KEY, a key the node's admin authorized");
  else e.hint("identity " + identity_id_ + " may " + auth::verbs_text(verbs_) + "; the node's admin grants verbs in its clients file");
  return e;
}

Status Session::handshake(const SigningKey* identity, const std::string& identity_path) {
  XC_TRY(greet(identity, identity_path));
  if (!wants_lane() || !(verbs_ & auth::kRun)) return {};
  // A shared-memory lane (wire-protocol.md section 8): its requests skip UCX both ways.
  const uint64_t id = next_id_++;
  auto f = request(MsgType::lane, MsgType::lane_reply, encode(RequestOnly{id}), {});
  XC_TRY(f);
  auto r = decode_reply(*this, f->header, id, decode_lane_offer);
  XC_TRY(r);
  if (r->status == ReplyStatus::ok) take_lane(*r);  // else, or if it cannot be attached here: UCX only
  return {};
}

Status Session::greet(const SigningKey* identity, const std::string& identity_path) {
  token_.reset();  // a connection made again starts without a session
  identity_id_.clear();
  ++session_;
  auto nonce = auth::random_nonce();
  XC_TRY(nonce);
  auto f = request(MsgType::hello, MsgType::hello_reply, encode(Hello{kVersion, kVersion, reply_address(), *nonce}), {});
  XC_TRY(f);
  auto r = decode_hello_reply(f->header);
  if (!r.ok()) return Error(Errc::malformed, peer() + ": " + r.error().message());
  if (r->status != ReplyStatus::ok && r->status != ReplyStatus::unsupported_version)
    return Error(Errc::unreachable, peer() + ": the node could not answer the handshake (" + status_name(r->status) + ")")
        .hint("its log says why; a node replacing its worker answers again within a second or two");
  if (r->status != ReplyStatus::ok || r->version != kVersion)
    return Error(Errc::unsupported, peer() + ": the node does not speak protocol version " + std::to_string(kVersion))
        .hint("use matching xcargo and xcargo-loader releases");
  node_ = std::move(*r);
  verbs_ = auth::kAllClientVerbs;
  // Checked before signing anything: a proof for another node's key would be one to use there.
  if (const RawKey* proven = proven_node_key(); proven && node_.node_key != *proven)
    return Error(Errc::unauthenticated, peer() + ": the node's hello names key " + to_hex(key_id_of(node_.node_key)) +
                                            ", not the key its TLS handshake proved")
        .hint("something between this client and the node relays its messages: do not use this address");
  if (node_.auth == AuthMode::none) return {};
  PublicKey node_key;
  node_key.raw = node_.node_key;
  if (!ed25519_verify(node_key, auth::node_proof(*nonce, node_.nonce, node_.node_key), node_.node_sig))
    return Error(Errc::unauthenticated, peer() + ": the node's hello is not signed by the key it names")
        .hint("something between this client and the node changed its messages");

  if (!identity) {
    if (node_.auth == AuthMode::optional) return {};
    return Error(Errc::unauthenticated, peer() + ": the node serves only authenticated clients, and no identity was given")
        .hint("pass --identity KEY or set XCARGO_IDENTITY=KEY; 'xcargo keygen -o ~/.config/xcargo/identity' makes one")
        .hint("the node's admin adds KEY.pub to the loader's clients");
  }
  return authenticate(*identity, identity_path, *nonce);
}

Result<std::shared_ptr<const SigningKey>> load_identity(const ConnectOptions& options) {
  if (options.identity_key) return options.identity_key;
  const std::string path = options.identity.empty() ? auth::default_identity_path() : options.identity;
  if (path.empty()) return std::shared_ptr<const SigningKey>();
  auto key = SigningKey::load(path, options.identity_passphrase);
  if (!key.ok()) {
    Error e = key.take_error().within("identity");  // keeps the key's own hints (chmod, passphrase)
    if (e.hints().empty()) e.hint("pass --identity KEY, a file written by 'xcargo keygen'");
    return e;
  }
  return std::shared_ptr<const SigningKey>(std::make_shared<SigningKey>(std::move(*key)));
}

Status Session::authenticate(const SigningKey& key, const std::string& identity_path, const Nonce& client_nonce) {
  const std::string id = to_hex(key.public_key().id);
  auto sig = key.sign(auth::client_proof(client_nonce, node_.nonce, node_.node_key, key.public_key().raw));
  XC_TRY(sig);
  const uint64_t rid = next_id_++;
  auto f = request(MsgType::auth, MsgType::auth_reply, encode(Auth{rid, key.public_key().raw, *sig}), {});
  XC_TRY(f);
  auto r = decode_reply(*this, f->header, rid, decode_auth_reply);
  XC_TRY(r);
  if (r->status != ReplyStatus::ok)
    return Error(Errc::unauthenticated, peer() + ": the node refused identity " + id + " (" + identity_path + "): " + r->message)
        .hint("the node's admin adds " + identity_path + ".pub to the loader's clients");
  identity_id_ = id;
  verbs_ = r->verbs;
  token_ = r->token;
  return {};
}

Result<PushReply> Session::push(ByteView cargo) {
  const uint64_t id = next_id_++;
  auto f = request(MsgType::push, MsgType::push_reply, encode(Push{id, cargo.size()}), cargo);
  XC_TRY(f);
  return decode_reply(*this, f->header, id, decode_push_reply);
}

Result<bool> Session::has(const Digest& digest) {
  const uint64_t id = next_id_++;
  auto f = request(MsgType::has, MsgType::has_reply, encode(Has{id, digest}), {});
  XC_TRY(f);
  auto r = decode_reply(*this, f->header, id, decode_has_reply);
  XC_TRY(r);
  return r->has;
}

namespace {
// An entry name the node could not decode: refused here, since the node's refusal could not
// name the request it answers (the client would wait out its time-out).
Status check_entry(std::string_view entry) {
  if (entry.size() <= kMaxName) return {};
  return Error(Errc::invalid_argument, "entry name '" + std::string(entry.substr(0, 24)) + "...' is " + std::to_string(entry.size()) +
                                           " bytes long, over the limit of " + std::to_string(kMaxName))
      .hint("'xcargo inspect CARGO' lists the cargo's entries");
}
}  // namespace

ByteView Session::InvokeHeader::make(const Session& c, bool seal, uint64_t id, const Digest& d, std::string_view e, uint64_t n) {
  if (bytes.size() < 8 || n != input_size || d != digest || e != entry || (seal && session != c.session_) ||
      timeout_ms != c.kernel_timeout_ms_ || flags != c.invoke_flags()) {
    bytes = encode(Invoke{id, d, std::string(e), n, c.kernel_timeout_ms_, c.invoke_flags()}, std::move(bytes));
    timeout_ms = c.kernel_timeout_ms_;
    flags = c.invoke_flags();
    if (seal) bytes = c.sealed(std::move(bytes));
    digest = d;
    entry.assign(e);
    input_size = n;
    session = c.session_;
  } else {
    le::store64(bytes.data(), id);
  }
  return bytes;
}

Result<InvokeReply> Session::invoke(const Digest& digest, std::string_view entry, ByteView input) {
  InvokeReply r;
  XC_TRY(invoke(digest, entry, input, r));
  return r;
}

std::optional<ByteView> Session::cancel_due() {
  if (!awaited_invoke_ || cancel_sent_ || !(cancel_requested_.load(std::memory_order_relaxed) || interrupted())) return std::nullopt;
  cancel_sent_ = true;
  cancel_header_ = sealed(encode(RequestOnly{awaited_invoke_}));
  return ByteView(cancel_header_);
}

Status Session::invoke(const Digest& digest, std::string_view entry, ByteView input, InvokeReply& reply) {
  XC_TRY(check_entry(entry));
  const uint64_t id = next_id_++;
  // A cancel asked for before this invoke, or after its reply, is for no invoke.
  cancel_requested_.store(false, std::memory_order_relaxed);
  cancel_sent_ = false;
  awaited_invoke_ = id;
  auto f = request(MsgType::invoke, MsgType::result, request_header_.make(*this, false, id, digest, entry, input.size()), input);
  awaited_invoke_ = 0;
  cancel_requested_.store(false, std::memory_order_relaxed);
  XC_TRY(f);
  Status s = decode_invoke_reply(*f, id, reply);
  spare_header_ = std::move(f->header);  // the next reply's header goes there
  // The caller's last output buffer: a small one for the next reply's data, a large one back
  // to the pool (large_buffers.h), as a caller of the other overload would release it.
  if (f->data.capacity() <= kSpareCapacity) spare_data_ = std::move(f->data);
  else release_large(std::move(f->data));
  return s;
}

Bytes Session::sealed(Bytes&& header) const {
  if (token_) header.insert(header.end(), token_->begin(), token_->end());
  return std::move(header);
}

Bytes Session::sealed(ByteView header) const {
  Bytes b;
  b.reserve(header.size() + kTokenSize);
  b.assign(header.begin(), header.end());
  if (token_) b.insert(b.end(), token_->begin(), token_->end());  // wire-protocol.md section 7
  return b;
}

void Session::invoke_reply(Frame& f, uint64_t id, Result<InvokeReply>& out) const {
  if (!out.ok()) out = InvokeReply{};
  if (Status s = decode_invoke_reply(f, id, *out); !s.ok()) out = s.take_error();
}

Status Session::decode_invoke_reply(Frame& f, uint64_t id, InvokeReply& r) const {
  if (f.type != MsgType::result)
    return Error(Errc::malformed, peer() + ": protocol error: expected reply type " + std::to_string(int(MsgType::result)) +
                                      ", got " + std::to_string(int(f.type)));
  if (Status s = decode_result_into(f.header, r.result); !s.ok()) return Error(Errc::malformed, peer() + ": " + s.error().message());
  if (r.result.request_id != id) return Error(Errc::malformed, peer() + ": reply to another request");
  if (r.result.output_size != f.data.size()) return Error(Errc::malformed, peer() + ": result size does not match its data");
  if (r.result.status == ReplyStatus::unauthenticated) return denied(r.result.message);
  r.output.swap(f.data);
  return {};
}

Status Session::send_request(MsgType, ByteView, ByteView) {
  return Error(Errc::unsupported, peer() + ": this connection cannot pipeline requests");
}
Result<Frame> Session::next_reply() { return Error(Errc::unsupported, peer() + ": this connection cannot pipeline requests"); }
Status Session::next_reply_into(Frame& f) {
  auto r = next_reply();
  XC_TRY(r);
  f = std::move(*r);
  return {};
}

Status Session::invoke_pipelined(size_t count, const std::function<Invocation(size_t)>& call, size_t window,
                                    const InvokeDone& done) {
  if (!pipelines() || window <= 1) {
    for (size_t i = 0; i < count; ++i) {
      const Invocation c = call(i);
      auto r = invoke(c.digest, c.entry, c.input);
      if (!r.ok() && r.error().code() == Errc::unreachable) {
        const Error e = r.error();
        done(i, r);
        for (size_t j = i + 1; j < count; ++j) {
          Result<InvokeReply> not_sent = Error(Errc::unreachable, "not sent: " + e.message());
          done(j, not_sent);
        }
        return e;
      }
      done(i, r);
    }
    return {};
  }
  InFlight in_flight(window);
  Frame frame;  // each reply in turn (its buffers reused)
  Result<InvokeReply> reply = InvokeReply{};  // the same, decoded (its strings and buffer reused)
  InvokeHeader header;  // the last invocation's, sealed
  std::deque<size_t> again;                        // answered `restarting`: to send on a new connection
  size_t next = 0;
  bool restarting = false;  // a worker is ending: send nothing more on this connection
  int reconnects = 0;
  // After a lost connection: every invocation not yet told is told, and the loss returned.
  auto give_up = [&](const Error& e) {
    in_flight.each([&](size_t i) {
      reply = Error(e.code(), e.message() + " (the request was in flight: it may have run)");
      done(i, reply);
    });
    for (size_t i : again) reply = Error(e.code(), "not sent again: " + e.message()), done(i, reply);
    for (; next < count; ++next) reply = Error(e.code(), "not sent: " + e.message()), done(next, reply);
    return e;
  };
  while (next < count || !again.empty() || !in_flight.empty()) {
    if (restarting && in_flight.empty()) {  // wire-protocol.md section 5.1: they did not run
      if (++reconnects > kResends)
        return give_up(Error(Errc::unreachable, peer() + ": the node answered 'restarting' " + std::to_string(reconnects) +
                                                    " times in a row")
                           .hint("its kernels keep failing; its log says which"));
      if (auto s = reconnect(); !s.ok()) return give_up(s.error());
      restarting = false;
    }
    while (!restarting && in_flight.size() < window && (next < count || !again.empty())) {
      if (lost_before_sending()) {
        if (!in_flight.empty()) break;  // their replies first
        if (auto s = reconnect(); !s.ok()) return give_up(s.error());
      }
      size_t i;
      if (!again.empty()) {
        i = again.front();
        again.pop_front();
      } else {
        i = next++;
      }
      const Invocation c = call(i);
      if (auto s = check_entry(c.entry); !s.ok()) {
        reply = s.take_error();
        done(i, reply);
        continue;
      }
      const uint64_t id = next_id_++;
      if (auto s = send_request(MsgType::invoke, header.make(*this, true, id, c.digest, c.entry, c.input.size()), c.input); !s.ok()) {
        again.push_front(i);
        return give_up(s.error());
      }
      in_flight.add(id, i);
    }
    if (in_flight.empty()) continue;
    if (auto s = next_reply_into(frame); !s.ok()) {
      // Those the node marked as never read did not run (wire-protocol.md 8.4): to the next
      // worker, as if answered `restarting`.
      for (const uint64_t id : never_read())
        if (const auto i = in_flight.take(id)) again.push_back(*i), restarting = true;
      if (!restarting) return give_up(s.error());
      // The worker said it was ending (`restarting`, or its lane's mark) and its connection
      // went before the rest were answered: those are told they may have run (a kernel that
      // hung its worker never answers); the ones answered `restarting`, and those not sent
      // yet, go to the next worker: they never ran, so failing them with the connection
      // would lose them (guarded by connection_test.cpp, "pipelined: after 'restarting', a
      // lost connection sends the ones that did not run to a new one", and
      // tests/e2e/adversary_test.sh, the requests behind hang_blocked).
      in_flight.each([&](size_t i) {
        reply = Error(s.error().code(), s.error().message() + " (the request was in flight: it may have run)");
        done(i, reply);
      });
      in_flight.clear();
      continue;
    }
    const auto id = leading_request_id(frame.type, frame.header);
    const auto i = id ? in_flight.take(*id) : std::nullopt;
    if (!i) continue;  // not one of ours (the transport drops those already)
    if (frame.type == MsgType::result && result_status(frame.header) == uint16_t(ReplyStatus::restarting)) {
      restarting = true;
      again.push_back(*i);
      continue;
    }
    reconnects = 0;
    invoke_reply(frame, *id, reply);
    done(*i, reply);
  }
  return {};
}

Result<Listing> Session::list() {
  const uint64_t id = next_id_++;
  auto f = request(MsgType::list, MsgType::list_reply, encode(RequestOnly{id}), {});
  XC_TRY(f);
  XC_TRY(decode_reply(*this, f->header, id, decode_request));
  auto l = decode_listing(f->data);
  if (!l.ok()) return Error(Errc::malformed, peer() + ": " + l.error().message());
  return l;
}

Result<RemoteRegion> Session::region(const std::string& name) {
  const uint64_t id = next_id_++;
  auto f = request(MsgType::region, MsgType::region_reply, encode(RegionQuery{id, name}), {});
  XC_TRY(f);
  auto r = decode_reply(*this, f->header, id, decode_region_reply);
  XC_TRY(r);
  if (r->status != ReplyStatus::ok)
    return Error(Errc::remote, peer() + ": region '" + name + "': " + status_name(r->status))
        .hint("'xcargo ls --to " + peer() + "' lists the node's regions");
  return RemoteRegion{name, r->address, r->length, std::move(r->rkey), session_};
}

Status Session::get(const RemoteRegion& region, uint64_t offset, void* out, size_t len) {
  if (offset > region.length || len > region.length - offset)
    return Error(Errc::invalid_argument, peer() + ": region '" + region.name + "': bytes " + std::to_string(offset) + "+" +
                                             std::to_string(len) + " are past its " + std::to_string(region.length));
  if (one_sided(region)) {
    // Its address and key belong to the worker that gave them; a new one (after a kernel
    // failure replaced it) maps the region elsewhere, under another key.
    if (region.session != session_)
      return Error(Errc::unreachable, peer() + ": region '" + region.name + "': its address and key are from an earlier "
                                                 "connection; the node's worker was replaced since")
          .hint("ask for the region again (Connection::region) and read with what it returns");
    return get_one_sided(region, offset, out, len);
  }
  const uint64_t id = next_id_++;
  auto f = request(MsgType::region_read, MsgType::region_data, encode(RegionRead{id, offset, len, region.name}), {});
  XC_TRY(f);
  auto r = decode_reply(*this, f->header, id, decode_region_data);
  XC_TRY(r);
  if (r->status != ReplyStatus::ok)
    return Error(Errc::remote, peer() + ": region '" + region.name + "': bytes " + std::to_string(offset) + "+" +
                                   std::to_string(len) + ": " + status_name(r->status));
  if (r->length != len || f->data.size() != len)
    return Error(Errc::malformed, peer() + ": region_data of " + std::to_string(f->data.size()) + " bytes for a read of " +
                                      std::to_string(len));
  if (len) std::memcpy(out, f->data.data(), len);
  return {};
}

Status Session::get_one_sided(const RemoteRegion&, uint64_t, void*, size_t) {
  return Error(Errc::unsupported, peer() + ": one-sided reads need a UCX connection opened with one_sided");
}

Result<std::vector<Counter>> Session::stats() {
  const uint64_t id = next_id_++;
  auto f = request(MsgType::stats, MsgType::stats_reply, encode(RequestOnly{id}), {});
  XC_TRY(f);
  XC_TRY(decode_reply(*this, f->header, id, decode_request));
  auto c = decode_counters(f->data);
  if (!c.ok()) return Error(Errc::malformed, peer() + ": " + c.error().message());
  return c;
}

}  // namespace xcargo::client
