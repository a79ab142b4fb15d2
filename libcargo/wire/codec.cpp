// Encoders and bounds-checked decoders for the wire protocol's headers, data and frames.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <utility>

#include "common/le.h"
#include "wire/wire.h"

namespace xcargo::wire {

const char* status_name(ReplyStatus s) {
  switch (s) {
    case ReplyStatus::ok: return "ok";
    case ReplyStatus::kernel_error: return "kernel_error";
    case ReplyStatus::not_loaded: return "not_loaded";
    case ReplyStatus::no_entry: return "no_entry";
    case ReplyStatus::reply_too_large: return "reply_too_large";
    case ReplyStatus::crashed: return "crashed";
    case ReplyStatus::timeout: return "timeout";
    case ReplyStatus::refused: return "refused";
    case ReplyStatus::internal: return "internal";
    case ReplyStatus::bad_request: return "bad_request";
    case ReplyStatus::limit: return "limit";
    case ReplyStatus::unsupported_version: return "unsupported_version";
    case ReplyStatus::hop_limit: return "hop_limit";
    case ReplyStatus::unreachable: return "unreachable";
    case ReplyStatus::no_region: return "no_region";
    case ReplyStatus::sandbox: return "sandbox";
    case ReplyStatus::out_of_range: return "out_of_range";
    case ReplyStatus::unauthenticated: return "unauthenticated";
    case ReplyStatus::interrupted: return "interrupted";
    case ReplyStatus::restarting: return "restarting";
    case ReplyStatus::cancelled: return "cancelled";
  }
  return "unknown";
}

namespace {

// Errc and the ErrorKind it travels as: the one table both directions read.
constexpr std::pair<Errc, ErrorKind> kErrorKinds[] = {
    {Errc::io, ErrorKind::io},
    {Errc::invalid_argument, ErrorKind::invalid_argument},
    {Errc::malformed, ErrorKind::malformed},
    {Errc::unsupported, ErrorKind::unsupported},
    {Errc::limit, ErrorKind::limit},
    {Errc::digest_mismatch, ErrorKind::digest_mismatch},
    {Errc::manifest, ErrorKind::manifest},
    {Errc::not_signed, ErrorKind::not_signed},
    {Errc::untrusted, ErrorKind::untrusted},
    {Errc::bad_signature, ErrorKind::bad_signature},
    {Errc::key, ErrorKind::key},
    {Errc::compile, ErrorKind::compile},
    {Errc::import, ErrorKind::import},
    {Errc::revoked, ErrorKind::revoked},
};

}  // namespace

ErrorKind error_kind_of(Errc code) {
  for (const auto& [c, k] : kErrorKinds)
    if (c == code) return k;
  return ErrorKind::other;
}

Errc errc_of(ErrorKind kind) {
  for (const auto& [c, k] : kErrorKinds)
    if (k == kind) return c;
  return Errc::remote;
}

namespace {

// The length of the well-formed UTF-8 sequence at s[i] (RFC 3629: no overlong forms, no
// surrogates, nothing past U+10FFFF), or 0 if there is none.
size_t utf8_length(const std::string& s, size_t i) {
  const auto at = [&](size_t k) { return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0; };
  const auto cont = [&](size_t k) { return (at(k) & 0xC0) == 0x80; };
  const unsigned char c = at(0);
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    const unsigned char lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
    return at(1) >= lo && at(1) <= hi && cont(2) ? 3 : 0;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    const unsigned char lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
    return at(1) >= lo && at(1) <= hi && cont(2) && cont(3) ? 4 : 0;
  }
  return 0;
}

// Where s has, from `from` on, a control character (C0, DEL, or C1 encoded in UTF-8) or a
// byte that is not part of well-formed UTF-8 (a lone 0x9B is an 8-bit terminal's CSI): bytes
// a terminal may act on. npos if none. Peers' text reaches terminals and logs: spec section 1.
size_t control_char(const std::string& s, size_t from = 0) {
  for (size_t i = from; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7F) {  // printable ASCII, as entry and variant names are: no decoding
      ++i;
      continue;
    }
    if (c < 0x20 || c == 0x7F) return i;
    const size_t n = utf8_length(s, i);
    if (n == 0) return i;
    if (c == 0xC2 && static_cast<unsigned char>(s[i + 1]) <= 0x9F) return i;
    i += n;
  }
  return std::string::npos;
}

// Writes into a buffer sized ahead (grown by doubling), trimmed to what was written by take():
// a field is a bounds check and a store, not a vector resize.
class Out {
public:
  Out() : b_(128) {}  // most headers: one allocation
  explicit Out(Bytes&& into) : b_(std::move(into)) { b_.resize(std::max<size_t>(b_.capacity(), 128)); }
  Out& u8(uint8_t v) { *put(1) = v; return *this; }
  Out& u16(uint16_t v) { le::store16(put(2), v); return *this; }
  Out& u32(uint32_t v) { le::store32(put(4), v); return *this; }
  Out& u64(uint64_t v) { le::store64(put(8), v); return *this; }
  Out& raw(ByteView v) {
    if (!v.empty()) std::memcpy(put(v.size()), v.data(), v.size());
    return *this;
  }
  Out& zeros(size_t n) {
    if (n) std::memset(put(n), 0, n);
    return *this;
  }
  // u16 length then the bytes; the caller keeps s within the message's limit. Control
  // characters, which decoders refuse, are sent as '?' (a message quoting LLVM, say).
  Out& str(const std::string& s) {
    u16(uint16_t(s.size()));
    const size_t at = n_;
    raw(as_bytes(s));
    for (size_t i = control_char(s); i != std::string::npos; i = control_char(s, i + 1)) {
      const bool c1 = static_cast<unsigned char>(s[i]) == 0xC2 && utf8_length(s, i) == 2;
      b_[at + i] = '?';
      if (c1) b_[at + ++i] = '?';  // both bytes of a C1 character
    }
    return *this;
  }
  Out& blob(ByteView b) { u16(uint16_t(b.size())); return raw(b); }
  // A result's log (wire-protocol.md 4.7): u16 dropped, u16 count, then the lines; the
  // first kMaxLogLines, each cut to kMaxLogLine bytes, the rest counted as dropped.
  Out& log(const std::vector<std::string>& lines, uint16_t dropped) {
    const size_t kept = std::min(lines.size(), kMaxLogLines);
    u16(uint16_t(std::min<size_t>(size_t(dropped) + (lines.size() - kept), UINT16_MAX)));
    u16(uint16_t(kept));
    for (size_t i = 0; i < kept; ++i) str(lines[i].size() <= kMaxLogLine ? lines[i] : lines[i].substr(0, kMaxLogLine));
    return *this;
  }
  Bytes take() {
    b_.resize(n_);
    return std::move(b_);
  }

private:
  uint8_t* put(size_t n) {
    if (b_.size() - n_ < n) b_.resize(std::max(b_.size() * 2, n_ + n));
    n_ += n;
    return b_.data() + n_ - n;
  }
  Bytes b_;
  size_t n_ = 0;
};

class In {
public:
  In(ByteView b, const char* what) : b_(b), what_(what) {}
  bool need(size_t n) {
    if (failed_ || b_.size() - pos_ < n) return fail("truncated");
    return true;
  }
  uint8_t u8() { return need(1) ? b_[pos_++] : 0; }
  uint16_t u16() { return need(2) ? (pos_ += 2, le::load16(&b_[pos_ - 2])) : 0; }
  uint32_t u32() { return need(4) ? (pos_ += 4, le::load32(&b_[pos_ - 4])) : 0; }
  uint64_t u64() { return need(8) ? (pos_ += 8, le::load64(&b_[pos_ - 8])) : 0; }
  void raw(uint8_t* out, size_t n) {
    if (need(n)) std::memcpy(out, &b_[pos_], n), pos_ += n;
  }
  void zeros(size_t n) {
    if (!need(n)) return;
    if (!le::all_zero(&b_[pos_], n)) fail("reserved bytes are not zero");
    pos_ += n;
  }
  std::string str(size_t max) {
    std::string s;
    str(max, s);
    return s;
  }
  // The same into s, its storage reused; left empty if the field does not decode.
  void str(size_t max, std::string& s) {
    s.clear();
    uint16_t n = u16();
    if (failed_) return;
    if (n > max) return (void)fail("a string of " + std::to_string(n) + " bytes is over the limit of " + std::to_string(max));
    if (!need(n)) return;
    s.assign(reinterpret_cast<const char*>(&b_[pos_]), n);
    if (const size_t at = control_char(s); at != std::string::npos) {
      s.clear();
      return (void)fail("a string holds a control character or a byte that is not UTF-8 (byte " + std::to_string(at) + ")");
    }
    pos_ += n;
  }
  Bytes blob(size_t max) {
    uint16_t n = u16();
    if (failed_) return {};
    if (n > max) return fail("a field of " + std::to_string(n) + " bytes is over the limit of " + std::to_string(max)), Bytes();
    if (!need(n)) return {};
    Bytes b(&b_[pos_], &b_[pos_] + n);
    pos_ += n;
    return b;
  }
  void status_field(ReplyStatus& out) {
    uint16_t v = u16();
    if (!failed_ && v > kMaxStatus) fail("unknown status " + std::to_string(v));
    out = ReplyStatus(v);
  }
  bool fail(const std::string& msg) {
    if (!failed_) error_ = msg;
    failed_ = true;
    return false;
  }
  // The whole input must have been consumed: no trailing bytes.
  xcargo::Status finish() {
    if (!failed_ && pos_ != b_.size()) fail(std::to_string(b_.size() - pos_) + " trailing bytes");
    if (failed_) return Error(Errc::malformed, std::string("wire: ") + what_ + ": " + error_);
    return {};
  }
  bool failed() const { return failed_; }
  size_t pos() const { return pos_; }

private:
  ByteView b_;
  const char* what_;
  size_t pos_ = 0;
  bool failed_ = false;
  std::string error_;
};

template <class T>
Result<T> done(In& in, T value) {
  XC_TRY(in.finish());
  return value;
}

}  // namespace

Bytes encode(const Hello& m) {
  Out o;
  o.raw(kHelloMagic).u16(m.min_version).u16(m.max_version).u32(0).u32(0).blob(m.reply_address);
  if (m.max_version >= 3) o.raw(m.nonce);
  return o.take();
}
std::optional<uint64_t> leading_request_id(MsgType type, ByteView header) {
  if (type == MsgType::hello || type == MsgType::hello_reply || header.size() < 8) return std::nullopt;
  return le::load64(header.data());
}

std::optional<uint16_t> result_status(ByteView h) {
  if (h.size() < 10) return std::nullopt;
  return le::load16(&h[8]);
}

Result<Hello> decode_hello(ByteView h) {
  In in(h, "hello");
  uint8_t magic[4] = {};
  in.raw(magic, 4);
  if (!in.failed() && std::memcmp(magic, kHelloMagic, 4) != 0) in.fail("bad magic (not an xcargo client?)");
  Hello m;
  m.min_version = in.u16();
  m.max_version = in.u16();
  in.zeros(8);
  if (!in.failed() && m.min_version > m.max_version) in.fail("min_version is above max_version");
  // Version 1 hellos end here, version 2 ones after the address: they still decode, so that
  // the answer can say which versions.
  if (!in.failed() && in.pos() < h.size()) m.reply_address = in.blob(kMaxAddress);
  if (!in.failed() && m.max_version >= 3) in.raw(m.nonce.data(), m.nonce.size());
  return done(in, std::move(m));
}

Bytes encode(const HelloReply& m) {
  return Out().raw(kHelloMagic).u16(m.version).u16(uint16_t(m.status)).u32(m.node_id).u32(m.node_count)
      .u64(m.max_cargo).u64(m.max_input).u64(m.max_reply).str(m.loader_version)
      .u16(uint16_t(m.auth)).zeros(6).raw(m.nonce).raw(m.node_key).raw(m.node_sig).take();
}
Result<HelloReply> decode_hello_reply(ByteView h) {
  In in(h, "hello_reply");
  uint8_t magic[4] = {};
  in.raw(magic, 4);
  if (!in.failed() && std::memcmp(magic, kHelloMagic, 4) != 0) in.fail("bad magic (not an xcargo loader?)");
  HelloReply m;
  m.version = in.u16();
  in.status_field(m.status);
  m.node_id = in.u32();
  m.node_count = in.u32();
  m.max_cargo = in.u64();
  m.max_input = in.u64();
  m.max_reply = in.u64();
  m.loader_version = in.str(kMaxName);
  const uint16_t auth = in.u16();
  if (!in.failed() && auth > uint16_t(AuthMode::required)) in.fail("unknown auth mode " + std::to_string(auth));
  m.auth = AuthMode(auth);
  in.zeros(6);
  in.raw(m.nonce.data(), m.nonce.size());
  in.raw(m.node_key.data(), m.node_key.size());
  in.raw(m.node_sig.data(), m.node_sig.size());
  return done(in, std::move(m));
}

Bytes encode(const Auth& m) { return Out().u64(m.request_id).raw(m.client_key).raw(m.signature).take(); }
Result<Auth> decode_auth(ByteView h) {
  In in(h, "auth");
  Auth m;
  m.request_id = in.u64();
  in.raw(m.client_key.data(), m.client_key.size());
  in.raw(m.signature.data(), m.signature.size());
  return done(in, std::move(m));
}

Bytes encode(const AuthReply& m) {
  return Out().u64(m.request_id).u16(uint16_t(m.status)).u16(m.verbs).u32(0).raw(m.token).str(m.message).take();
}
Result<AuthReply> decode_auth_reply(ByteView h) {
  In in(h, "auth_reply");
  AuthReply m;
  m.request_id = in.u64();
  in.status_field(m.status);
  m.verbs = in.u16();
  in.zeros(4);
  in.raw(m.token.data(), m.token.size());
  m.message = in.str(kMaxMessage);
  return done(in, std::move(m));
}

Bytes encode(const LaneOffer& m) {
  return Out().u64(m.request_id).u16(uint16_t(m.status)).u16(0).u32(uint32_t(m.shm_id)).raw(m.nonce).str(m.message).take();
}
Result<LaneOffer> decode_lane_offer(ByteView h) {
  In in(h, "lane_reply");
  LaneOffer m;
  m.request_id = in.u64();
  in.status_field(m.status);
  in.zeros(2);
  m.shm_id = int32_t(in.u32());
  in.raw(m.nonce.data(), m.nonce.size());
  m.message = in.str(kMaxMessage);
  return done(in, std::move(m));
}

Bytes encode(const Push& m) { return Out().u64(m.request_id).u64(m.cargo_size).take(); }
Result<Push> decode_push(ByteView h) {
  In in(h, "push");
  Push m;
  m.request_id = in.u64();
  m.cargo_size = in.u64();
  return done(in, std::move(m));
}

Bytes encode(const PushReply& m) {
  uint8_t flags = uint8_t(m.already_loaded) | uint8_t(m.jit_compiled) << 1 | uint8_t(m.disk_cache_hit) << 2;
  return Out().u64(m.request_id).u16(uint16_t(m.status)).u16(uint16_t(m.error_kind)).u8(flags).zeros(3).raw(m.digest)
      .str(m.variant).str(m.message).take();
}
Result<PushReply> decode_push_reply(ByteView h) {
  In in(h, "push_reply");
  PushReply m;
  m.request_id = in.u64();
  in.status_field(m.status);
  m.error_kind = ErrorKind(in.u16());
  uint8_t flags = in.u8();
  if (!in.failed() && (flags & ~7u)) in.fail("unknown flags");
  m.already_loaded = flags & 1, m.jit_compiled = flags & 2, m.disk_cache_hit = flags & 4;
  in.zeros(3);
  in.raw(m.digest.data(), 32);
  m.variant = in.str(kMaxName);
  m.message = in.str(kMaxMessage);
  return done(in, std::move(m));
}

Bytes encode(const Has& m) { return Out().u64(m.request_id).raw(m.digest).take(); }
Result<Has> decode_has(ByteView h) {
  In in(h, "has");
  Has m;
  m.request_id = in.u64();
  in.raw(m.digest.data(), 32);
  return done(in, std::move(m));
}

Bytes encode(const HasReply& m) { return Out().u64(m.request_id).u8(m.has ? 1 : 0).zeros(7).take(); }
Result<HasReply> decode_has_reply(ByteView h) {
  In in(h, "has_reply");
  HasReply m;
  m.request_id = in.u64();
  uint8_t has = in.u8();
  if (!in.failed() && has > 1) in.fail("has must be 0 or 1");
  m.has = has == 1;
  in.zeros(7);
  return done(in, std::move(m));
}

Bytes encode(const Invoke& m) { return encode(m, Bytes()); }
Bytes encode(const Invoke& m, Bytes&& into) {
  return Out(std::move(into)).u64(m.request_id).raw(m.digest).u64(m.input_size).u32(m.timeout_ms).u32(m.flags).str(m.entry).take();
}
Result<Invoke> decode_invoke(ByteView h) {
  In in(h, "invoke");
  Invoke m;
  m.request_id = in.u64();
  in.raw(m.digest.data(), 32);
  m.input_size = in.u64();
  m.timeout_ms = in.u32();
  m.flags = in.u32();
  if (!in.failed() && (m.flags & ~kInvokeLog) != 0) in.fail("unknown flags");
  m.entry = in.str(kMaxName);
  if (!in.failed() && m.entry.empty()) in.fail("empty entry name");
  return done(in, std::move(m));
}

Bytes encode(const ResultMsg& m) { return encode(m, Bytes()); }
Bytes encode(const ResultMsg& m, Bytes&& into) {
  return Out(std::move(into)).u64(m.request_id).u16(uint16_t(m.status)).zeros(2).u32(uint32_t(m.kernel_return)).u64(m.output_size)
      .u32(m.node_id).u32(m.hops).u64(m.kernel_ns).str(m.variant).str(m.message).log(m.log, m.log_dropped).take();
}
template <>
void Reencoder<ResultMsg>::encode(const ResultMsg& m, Bytes& out) {
  if (last_.empty() || m.status != key_.status || m.node_id != key_.node_id || m.hops != key_.hops ||
      m.variant != key_.variant || m.message != key_.message || !m.log.empty() || !key_.log.empty() ||
      m.log_dropped != key_.log_dropped) {
    last_ = wire::encode(m, std::move(last_));
    key_ = m;
  } else {  // the offsets of wire-protocol.md 4.7
    le::store64(&last_[0], m.request_id);
    le::store32(&last_[12], uint32_t(m.kernel_return));
    le::store64(&last_[16], m.output_size);
    le::store64(&last_[32], m.kernel_ns);
  }
  out.assign(last_.begin(), last_.end());
}

template <>
void Reencoder<Forward>::encode(const Forward& f, Bytes& out) {
  if (last_.empty() || f.request_id != key_.request_id || f.digest != key_.digest || f.from_node != key_.from_node ||
      f.cargo_size != key_.cargo_size || f.input_size != key_.input_size || f.entry != key_.entry ||
      f.reply_address != key_.reply_address) {
    last_ = wire::encode(f, std::move(last_));
    key_.request_id = f.request_id, key_.digest = f.digest, key_.from_node = f.from_node;
    key_.cargo_size = f.cargo_size, key_.input_size = f.input_size, key_.entry = f.entry;
    key_.reply_address.assign(f.reply_address.begin(), f.reply_address.end());
  } else {
    le::store32(&last_[40], f.hop);  // wire-protocol.md 4.9
  }
  out.assign(last_.begin(), last_.end());
}

Result<ResultMsg> decode_result(ByteView h) {
  ResultMsg m;
  XC_TRY(decode_result_into(h, m));
  return m;
}

xcargo::Status decode_result_into(ByteView h, ResultMsg& m) {
  In in(h, "result");
  m.request_id = in.u64();
  in.status_field(m.status);
  in.zeros(2);
  m.kernel_return = int32_t(in.u32());
  m.output_size = in.u64();
  m.node_id = in.u32();
  m.hops = in.u32();
  m.kernel_ns = in.u64();
  in.str(kMaxName, m.variant);
  in.str(kMaxMessage, m.message);
  m.log_dropped = in.u16();
  const uint16_t lines = in.u16();
  if (!in.failed() && lines > kMaxLogLines) in.fail("more than " + std::to_string(kMaxLogLines) + " log lines");
  m.log.clear();
  for (uint16_t i = 0; i < lines && !in.failed(); ++i) m.log.push_back(in.str(kMaxLogLine));
  return in.finish();
}

Bytes encode(const RequestOnly& m) { return Out().u64(m.request_id).take(); }

Bytes encode(const Forward& m) { return encode(m, Bytes()); }
Bytes encode(const Forward& m, Bytes&& into) {
  return Out(std::move(into)).u64(m.request_id).raw(m.digest).u32(m.hop).u32(m.from_node).u64(m.cargo_size).u64(m.input_size)
      .str(m.entry).blob(m.reply_address).take();
}
Bytes encode(const RegionQuery& m) { return Out().u64(m.request_id).str(m.name).take(); }
Result<RegionQuery> decode_region(ByteView h) {
  In in(h, "region");
  RegionQuery m;
  m.request_id = in.u64();
  m.name = in.str(kMaxName);
  if (!in.failed() && m.name.empty()) in.fail("empty region name");
  return done(in, std::move(m));
}

Bytes encode(const RegionReply& m) {
  return Out().u64(m.request_id).u16(uint16_t(m.status)).zeros(6).u64(m.address).u64(m.length).blob(m.rkey).take();
}
Result<RegionReply> decode_region_reply(ByteView h) {
  In in(h, "region_reply");
  RegionReply m;
  m.request_id = in.u64();
  in.status_field(m.status);
  in.zeros(6);
  m.address = in.u64();
  m.length = in.u64();
  m.rkey = in.blob(kMaxAddress);
  return done(in, std::move(m));
}

Bytes encode(const RegionRead& m) { return Out().u64(m.request_id).u64(m.offset).u64(m.length).str(m.name).take(); }
Result<RegionRead> decode_region_read(ByteView h) {
  In in(h, "region_read");
  RegionRead m;
  m.request_id = in.u64();
  m.offset = in.u64();
  m.length = in.u64();
  m.name = in.str(kMaxName);
  if (!in.failed() && m.name.empty()) in.fail("empty region name");
  return done(in, std::move(m));
}

Bytes encode(const RegionData& m) { return Out().u64(m.request_id).u16(uint16_t(m.status)).zeros(6).u64(m.length).take(); }
Result<RegionData> decode_region_data(ByteView h) {
  In in(h, "region_data");
  RegionData m;
  m.request_id = in.u64();
  in.status_field(m.status);
  in.zeros(6);
  m.length = in.u64();
  return done(in, std::move(m));
}

Result<Forward> decode_forward(ByteView h) {
  In in(h, "forward");
  Forward m;
  m.request_id = in.u64();
  in.raw(m.digest.data(), 32);
  m.hop = in.u32();
  m.from_node = in.u32();
  m.cargo_size = in.u64();
  m.input_size = in.u64();
  m.entry = in.str(kMaxName);
  if (!in.failed() && m.entry.empty()) in.fail("empty entry name");
  if (!in.failed() && m.hop == 0) in.fail("hop must be at least 1");
  if (!in.failed() && m.cargo_size > UINT64_MAX - m.input_size) in.fail("sizes overflow");
  m.reply_address = in.blob(kMaxAddress);
  return done(in, std::move(m));
}
namespace {
constexpr uint8_t kRelayMagic[4] = {'x', 'c', 'R', '1'};
}  // namespace

Bytes encode(const RelayAddress& a) { return Out().raw(ByteView(kRelayMagic, 4)).u32(a.node_id).u64(a.relay_id).take(); }
std::optional<RelayAddress> relay_address_of(ByteView b) {
  if (b.size() != kRelayAddressSize || std::memcmp(b.data(), kRelayMagic, 4) != 0) return std::nullopt;
  RelayAddress a;
  a.node_id = le::load32(b.data() + 4);
  a.relay_id = le::load64(b.data() + 8);
  if (a.relay_id == 0) return std::nullopt;
  return a;
}
Bytes encode(const Relay& m) { return Out().u64(m.relay_id).blob(m.result).take(); }
Result<Relay> decode_relay(ByteView h) {
  In in(h, "relay");
  Relay m;
  m.relay_id = in.u64();
  m.result = in.blob(kMaxHeader);
  return done(in, std::move(m));
}

Result<RequestOnly> decode_request(ByteView h) {
  In in(h, "request");
  RequestOnly m;
  m.request_id = in.u64();
  return done(in, std::move(m));
}

namespace {
constexpr uint32_t kMaxListed = 4096, kMaxCounters = 256, kMaxRegions = 256;
constexpr size_t kListingMinRecord = 32 + 8 + 2 * 3 + 2 + 2;  // empty strings and lists
}  // namespace

Bytes encode_listing(const Listing& listing) {
  Out o;
  o.u32(uint32_t(listing.cargos.size()));
  for (const auto& c : listing.cargos) {
    o.raw(c.digest).u64(c.invocations).str(c.name).str(c.version).str(c.variant);
    o.u16(uint16_t(c.variants.size()));
    for (const auto& v : c.variants) o.str(v);
    o.u16(uint16_t(c.entries.size()));
    for (const auto& e : c.entries) o.str(e);
  }
  o.u32(uint32_t(listing.regions.size()));
  for (const auto& r : listing.regions) o.str(r.name).u64(r.length);
  o.str(listing.triple).str(listing.cpu).str(listing.prefer);
  return o.take();
}

Result<Listing> decode_listing(ByteView data) {
  In in(data, "list_reply");
  uint32_t n = in.u32();
  if (!in.failed() && (n > kMaxListed || uint64_t(n) * kListingMinRecord > data.size()))
    in.fail("count " + std::to_string(n) + " does not fit the data");
  Listing listing;
  std::vector<CargoListing>& out = listing.cargos;
  for (uint32_t i = 0; i < n && !in.failed(); ++i) {
    CargoListing c;
    in.raw(c.digest.data(), 32);
    c.invocations = in.u64();
    c.name = in.str(kMaxName);
    c.version = in.str(kMaxName);
    c.variant = in.str(kMaxName);
    uint16_t nv = in.u16();
    if (nv > 64) in.fail("too many variants");
    for (uint16_t j = 0; j < nv && !in.failed(); ++j) c.variants.push_back(in.str(kMaxName));
    uint16_t ne = in.u16();
    if (ne > 256) in.fail("too many entries");
    for (uint16_t j = 0; j < ne && !in.failed(); ++j) c.entries.push_back(in.str(kMaxName));
    out.push_back(std::move(c));
  }
  uint32_t nr = in.u32();
  if (!in.failed() && (nr > kMaxRegions || uint64_t(nr) * 10 > data.size())) in.fail("region count does not fit the data");
  for (uint32_t i = 0; i < nr && !in.failed(); ++i) {
    RegionListing r;
    r.name = in.str(kMaxName);
    r.length = in.u64();
    listing.regions.push_back(std::move(r));
  }
  listing.triple = in.str(kMaxName);
  listing.cpu = in.str(kMaxName);
  listing.prefer = in.str(kMaxName);
  return done(in, std::move(listing));
}

Bytes encode_counters(const std::vector<Counter>& counters) {
  Out o;
  o.u32(uint32_t(counters.size()));
  for (const auto& c : counters) o.str(c.name).u64(c.value);
  return o.take();
}

Result<std::vector<Counter>> decode_counters(ByteView data) {
  In in(data, "stats_reply");
  uint32_t n = in.u32();
  if (!in.failed() && (n > kMaxCounters || uint64_t(n) * 10 > data.size())) in.fail("count does not fit the data");
  std::vector<Counter> out;
  for (uint32_t i = 0; i < n && !in.failed(); ++i) {
    Counter c;
    c.name = in.str(kMaxName);
    c.value = in.u64();
    out.push_back(std::move(c));
  }
  return done(in, std::move(out));
}

Bytes encode_frame(MsgType type, ByteView header, ByteView data) {
  return Out().u16(uint16_t(type)).u16(0).u32(uint32_t(header.size())).u64(data.size()).raw(header).raw(data).take();
}

Result<FrameHead> decode_frame_head(ByteView bytes, uint64_t max_data) {
  In in(bytes.first(std::min(bytes.size(), kFrameHeaderSize)), "frame");
  const uint16_t type = in.u16();
  in.zeros(2);
  FrameHead h;
  h.header_len = in.u32();
  h.data_len = in.u64();
  if (in.failed()) return Error(Errc::malformed, "wire: frame: truncated");
  if (type == 0 || type > kMaxMsgType) return Error(Errc::malformed, "wire: frame: unknown message type " + std::to_string(type));
  if (h.header_len > kMaxHeader)
    return Error(Errc::limit, "wire: frame: a header of " + std::to_string(h.header_len) + " bytes (at most " + std::to_string(kMaxHeader) + ")");
  if (h.data_len > max_data)
    return Error(Errc::limit, "wire: frame: " + std::to_string(h.data_len) + " bytes of data (at most " + std::to_string(max_data) + ")");
  h.type = MsgType(type);
  return h;
}

Result<Frame> decode_frame(ByteView bytes, uint64_t max_data, size_t* consumed) {
  auto head = decode_frame_head(bytes, max_data);
  XC_TRY(head);
  const uint32_t hlen = head->header_len;
  const uint64_t dlen = head->data_len;
  if (bytes.size() - kFrameHeaderSize < hlen || bytes.size() - kFrameHeaderSize - hlen < dlen)
    return Error(Errc::malformed, "wire: frame: truncated");
  Frame f;
  f.type = head->type;
  const uint8_t* p = bytes.data() + kFrameHeaderSize;
  f.header.assign(p, p + hlen);
  f.data.assign(p + hlen, p + hlen + dlen);
  if (consumed) *consumed = kFrameHeaderSize + hlen + size_t(dlen);
  return f;
}

}  // namespace xcargo::wire
