// Compile service messages (protocol.h).
#include "compiler/protocol.h"

#include <cstring>

#include "xcargo/file.h"

namespace xcargo::loader::compiler {

namespace {

constexpr uint8_t kRequestMagic[4] = {'X', 'C', 'R', 'Q'};
constexpr uint8_t kReplyMagic[4] = {'X', 'C', 'R', 'P'};
constexpr uint32_t kMaxErrc = uint32_t(Errc::unauthenticated);

void put32(Bytes& b, uint32_t v) { b.insert(b.end(), reinterpret_cast<uint8_t*>(&v), reinterpret_cast<uint8_t*>(&v) + 4); }
void put64(Bytes& b, uint64_t v) { b.insert(b.end(), reinterpret_cast<uint8_t*>(&v), reinterpret_cast<uint8_t*>(&v) + 8); }
uint32_t get32(const uint8_t* p) { uint32_t v; std::memcpy(&v, p, 4); return v; }
uint64_t get64(const uint8_t* p) { uint64_t v; std::memcpy(&v, p, 8); return v; }

Error broken(const std::string& what) { return Error(Errc::malformed, "compile service: " + what); }

struct ReplyHead {
  uint32_t status, flags, text;
  uint64_t object;
};
Result<ReplyHead> reply_head(const uint8_t* p) {
  if (std::memcmp(p, kReplyMagic, 4) != 0) return broken("a reply without its magic");
  ReplyHead h{get32(p + 4), get32(p + 8), get32(p + 12), get64(p + 16)};
  if (h.status > kMaxErrc + 1 || h.flags > 15 || h.text > kMaxText || h.object > kMaxObject || (h.status != 0 && h.object != 0))
    return broken("a reply whose header is out of range");
  return h;
}

Result<CompiledObject> reply_value(const ReplyHead& h, std::string text, Bytes object) {
  if (h.status != 0) {
    std::vector<std::string> lines;
    size_t at = 0;
    while (at <= text.size()) {
      const size_t nl = text.find('\n', at);
      lines.push_back(text.substr(at, nl == std::string::npos ? std::string::npos : nl - at));
      if (nl == std::string::npos) break;
      at = nl + 1;
    }
    Error e(Errc(h.status - 1), lines[0]);
    for (size_t i = 1; i < lines.size(); ++i) e.hint(lines[i]);
    return e;
  }
  CompiledObject c;
  c.cache_enabled = h.flags & 1;
  c.cache_hit = h.flags & 2;
  c.cache_damaged = h.flags & 4;
  c.quick = h.flags & 8;
  c.store_error = std::move(text);
  c.object = std::move(object);
  return c;
}

}  // namespace

Bytes encode_request(const std::string& variant, ByteView cargo, bool allow_quick) {
  Bytes b(kRequestMagic, kRequestMagic + 4);
  put32(b, uint32_t(variant.size()));
  put64(b, cargo.size());
  put32(b, allow_quick ? 1 : 0);
  b.insert(b.end(), variant.begin(), variant.end());
  b.insert(b.end(), cargo.begin(), cargo.end());
  return b;
}

Bytes encode_reply(const Result<CompiledObject>& r) {
  std::string text;
  uint32_t status = 0, flags = 0;
  ByteView object;
  if (r.ok()) {
    flags = (r->cache_enabled ? 1 : 0) | (r->cache_hit ? 2 : 0) | (r->cache_damaged ? 4 : 0) | (r->quick ? 8 : 0);
    text = r->store_error;
    object = r->object;
  } else {
    status = uint32_t(r.error().code()) + 1;
    text = r.error().message();
    for (const auto& h : r.error().hints()) text += "\n" + h;
  }
  if (text.size() > kMaxText) text.resize(kMaxText);
  Bytes b(kReplyMagic, kReplyMagic + 4);
  put32(b, status);
  put32(b, flags);
  put32(b, uint32_t(text.size()));
  put64(b, object.size());
  b.insert(b.end(), text.begin(), text.end());
  b.insert(b.end(), object.begin(), object.end());
  return b;
}

Result<Request> read_request(int fd, uint64_t max_cargo) {
  uint8_t head[20];
  switch (read_exact(fd, head, sizeof head)) {
    case ReadEnd::done: break;
    case ReadEnd::closed: return Error(Errc::unreachable, "compile service: the worker closed the connection");
    default: return broken("a request cut short");
  }
  if (std::memcmp(head, kRequestMagic, 4) != 0) return broken("a request without its magic");
  const uint32_t name = get32(head + 4);
  const uint64_t size = get64(head + 8);
  const uint32_t flags = get32(head + 16);
  if (name == 0 || name > kMaxVariantName || size > max_cargo || flags > 1) return broken("a request over the limits");
  Request r;
  r.allow_quick = flags & 1;
  r.variant.resize(name);
  r.cargo.resize(size);
  if (read_exact(fd, reinterpret_cast<uint8_t*>(r.variant.data()), name) != ReadEnd::done ||
      read_exact(fd, r.cargo.data(), size) != ReadEnd::done)
    return broken("a request cut short");
  return r;
}

Result<Result<CompiledObject>> read_reply(int fd, std::chrono::steady_clock::time_point deadline) {
  uint8_t head[kReplyHeader];
  auto fail = [](ReadEnd end) {
    return end == ReadEnd::timed_out ? Error(Errc::compile, "the compile service did not answer in time")
                                     : Error(Errc::unreachable, "the compile service has stopped (the loader's log says why)");
  };
  if (ReadEnd e = read_exact(fd, head, sizeof head, deadline); e != ReadEnd::done) return fail(e);
  auto h = reply_head(head);
  XC_TRY(h);
  std::string text(h->text, '\0');
  Bytes object(h->object);
  if (ReadEnd e = read_exact(fd, reinterpret_cast<uint8_t*>(text.data()), text.size(), deadline); e != ReadEnd::done) return fail(e);
  if (ReadEnd e = read_exact(fd, object.data(), object.size(), deadline); e != ReadEnd::done) return fail(e);
  return reply_value(*h, std::move(text), std::move(object));
}

uint64_t reply_length(ByteView b) {
  if (b.size() < kReplyHeader) return 0;
  auto h = reply_head(b.data());
  return h.ok() ? kReplyHeader + h->text + h->object : 0;
}

Result<Result<CompiledObject>> decode_reply(ByteView b) {
  if (b.size() < kReplyHeader) return broken("a reply cut short");
  auto h = reply_head(b.data());
  XC_TRY(h);
  if (b.size() != kReplyHeader + h->text + h->object) return broken("a reply of the wrong length");
  std::string text(reinterpret_cast<const char*>(b.data()) + kReplyHeader, h->text);
  Bytes object(b.begin() + kReplyHeader + h->text, b.end());
  return reply_value(*h, std::move(text), std::move(object));
}

}  // namespace xcargo::loader::compiler
