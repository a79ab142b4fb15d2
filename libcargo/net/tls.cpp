// TLS 1.3 channels between Ed25519 identities (libcargo/net/tls.h), on OpenSSL.
#include "net/tls.h"

#include "common/large_buffers.h"

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <cerrno>
#include <cstring>

namespace xcargo::tls {

namespace {

SSL* ssl_of(void* p) { return static_cast<SSL*>(p); }
SSL_CTX* ctx_of(void* p) { return static_cast<SSL_CTX*>(p); }

// OpenSSL's last error, as text; clears its queue.
std::string openssl_error(const char* what) {
  std::string s = what;
  const unsigned long e = ERR_peek_last_error();
  if (e) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    s += std::string(": ") + buf;
  }
  ERR_clear_error();
  return s;
}

// Empties OpenSSL's error queue before a call whose outcome SSL_get_error reads. Looking
// first is cheaper than clearing an empty queue, which every record's read and write did.
void clear_errors() {
  if (ERR_peek_error() != 0) ERR_clear_error();
}

struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct PkeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using X509Ptr = std::unique_ptr<X509, X509Free>;
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;

X509Ptr from_der(const Bytes& der) {
  const unsigned char* p = der.data();
  return X509Ptr(d2i_X509(nullptr, &p, long(der.size())));
}

// The raw Ed25519 key of a certificate; false if it holds another kind of key.
bool ed25519_key(X509* x, RawKey* raw) {
  EVP_PKEY* k = X509_get0_pubkey(x);
  size_t len = raw->size();
  return k && EVP_PKEY_get_id(k) == EVP_PKEY_ED25519 && EVP_PKEY_get_raw_public_key(k, raw->data(), &len) == 1 &&
         len == raw->size();
}

std::string key_name(const RawKey& k) { return "xcargo " + to_hex(ByteView(k.data(), 8)); }

}  // namespace

Result<Bytes> certificate(const SigningKey& issuer, const RawKey& subject, std::chrono::seconds valid) {
  PkeyPtr subject_key(EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr, subject.data(), subject.size()));
  X509Ptr x(X509_new());
  if (!subject_key || !x) return Error(Errc::io, openssl_error("certificate"));
  uint8_t serial[16];
  if (RAND_bytes(serial, sizeof serial) != 1) return Error(Errc::io, openssl_error("certificate: random serial"));
  serial[0] &= 0x7f;  // positive
  BIGNUM* bn = BN_bin2bn(serial, sizeof serial, nullptr);
  const bool serial_set = bn && BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x.get()));
  BN_free(bn);
  X509_NAME* subject_name = X509_get_subject_name(x.get());
  X509_NAME* issuer_name = X509_get_issuer_name(x.get());
  const std::string sn = key_name(subject), in = key_name(issuer.public_key().raw);
  const bool ok =
      serial_set && X509_set_version(x.get(), 2) && X509_gmtime_adj(X509_getm_notBefore(x.get()), -3600) &&
      X509_gmtime_adj(X509_getm_notAfter(x.get()), long(valid.count())) &&
      X509_NAME_add_entry_by_txt(subject_name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(sn.c_str()), -1, -1, 0) &&
      X509_NAME_add_entry_by_txt(issuer_name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(in.c_str()), -1, -1, 0) &&
      X509_set_pubkey(x.get(), subject_key.get()) &&
      X509_sign(x.get(), static_cast<EVP_PKEY*>(issuer.openssl_pkey()), nullptr) > 0;  // Ed25519: no digest
  if (!ok) return Error(Errc::io, openssl_error("certificate"));
  const int n = i2d_X509(x.get(), nullptr);
  if (n <= 0) return Error(Errc::io, openssl_error("certificate: encoding"));
  Bytes der;
  der.resize(size_t(n));
  unsigned char* p = der.data();
  i2d_X509(x.get(), &p);
  return der;
}

Result<Credential> Credential::self_signed(const SigningKey& identity) {
  // Ten years: the key, not the certificate, is what the other end pins.
  auto der = certificate(identity, identity.public_key().raw, std::chrono::hours(24 * 3650));
  XC_TRY(der);
  return Credential{identity, {std::move(*der)}};
}

// The chain check OpenSSL calls instead of its own (a CA's): [leaf self-signed] or [leaf,
// issuer] where issuer's key signed leaf and leaf is within its validity; both Ed25519. The
// handshake itself proves the leaf's private key. Then the context's Accept decides.
int verify_chain(void* store_ctx, void*) {
  auto* sctx = static_cast<X509_STORE_CTX*>(store_ctx);
  SSL* ssl = static_cast<SSL*>(X509_STORE_CTX_get_ex_data(sctx, SSL_get_ex_data_X509_STORE_CTX_idx()));
  auto* ch = ssl ? static_cast<Channel*>(SSL_get_app_data(ssl)) : nullptr;
  if (!ch) return 0;
  auto refuse = [&](std::string why) {
    ch->refusal_ = std::move(why);
    X509_STORE_CTX_set_error(sctx, X509_V_ERR_CERT_REJECTED);  // sent as a bad_certificate alert
    return 0;
  };
  X509* leaf = X509_STORE_CTX_get0_cert(sctx);
  STACK_OF(X509)* chain = X509_STORE_CTX_get0_untrusted(sctx);  // as sent, the leaf first
  const int n = chain ? sk_X509_num(chain) : 0;
  if (!leaf || n < 1 || n > 2) return refuse("its certificate chain has " + std::to_string(n) + " certificates (1 or 2 expected)");
  Peer p;
  RawKey leaf_key{};
  if (!ed25519_key(leaf, &leaf_key)) return refuse("its certificate's key is not an Ed25519 key");
  if (n == 1) {
    if (X509_verify(leaf, X509_get0_pubkey(leaf)) != 1) return refuse("its certificate is not signed by its own key");
    p.identity = leaf_key;
  } else {
    X509* issuer = sk_X509_value(chain, 1);
    if (!ed25519_key(issuer, &p.identity)) return refuse("its certificate's issuer key is not an Ed25519 key");
    if (X509_verify(leaf, X509_get0_pubkey(issuer)) != 1) return refuse("its certificate is not signed by the key it names as issuer");
    if (X509_cmp_current_time(X509_get0_notBefore(leaf)) >= 0 || X509_cmp_current_time(X509_get0_notAfter(leaf)) <= 0)
      return refuse("its certified key is outside its validity");
    p.certified = true;
  }
  ERR_clear_error();
  std::string why;
  if (!ch->context_->accept_(p, &why)) return refuse(why.empty() ? "its key is not accepted" : why);
  ch->peer_ = p;
  return 1;
}

namespace {
int verify_shim(X509_STORE_CTX* sctx, void* arg) { return verify_chain(sctx, arg); }
}  // namespace

Context::~Context() { SSL_CTX_free(ctx_of(ctx_)); }

Result<std::shared_ptr<Context>> Context::create(Role role, const Credential& own, Accept accept) {
  if (own.chain.empty() || own.chain.size() > 2) return Error(Errc::invalid_argument, "tls: a chain of 1 or 2 certificates is needed");
  std::shared_ptr<Context> c(new Context());
  c->role_ = role;
  c->accept_ = std::move(accept);
  SSL_CTX* ctx = SSL_CTX_new(role == server ? TLS_server_method() : TLS_client_method());
  if (!ctx) return Error(Errc::io, openssl_error("tls: context"));
  c->ctx_ = ctx;
  X509Ptr leaf = from_der(own.chain[0]);
  if (!leaf) return Error(Errc::invalid_argument, openssl_error("tls: own certificate"));
  bool ok = SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) && SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION) &&
            SSL_CTX_set_ciphersuites(ctx, "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256") &&
            SSL_CTX_set1_sigalgs_list(ctx, "ed25519") && SSL_CTX_set1_client_sigalgs_list(ctx, "ed25519") &&
            SSL_CTX_set1_groups_list(ctx, "X25519") && SSL_CTX_use_certificate(ctx, leaf.get()) == 1 &&
            SSL_CTX_use_PrivateKey(ctx, static_cast<EVP_PKEY*>(own.key.openssl_pkey())) == 1 &&
            SSL_CTX_check_private_key(ctx) == 1;
  if (ok && own.chain.size() == 2) {
    X509Ptr issuer = from_der(own.chain[1]);
    ok = issuer && SSL_CTX_add1_chain_cert(ctx, issuer.get()) == 1;
  }
  if (!ok) return Error(Errc::invalid_argument, openssl_error("tls: own key and certificates"));
  SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET | SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
  SSL_CTX_set_num_tickets(ctx, 0);
  // Reads take what the socket has, not a record header and then its body: half the system
  // calls. What OpenSSL buffers so is why receive() must be called until want_read.
  SSL_CTX_set_read_ahead(ctx, 1);
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_NO_AUTO_CHAIN);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  SSL_CTX_set_cert_verify_callback(ctx, &verify_shim, nullptr);
  return c;
}

namespace {

// A client's socket reads during its handshake: the first bytes kept (Channel::first_bytes).
long record_first(BIO* b, int oper, const char* argp, size_t, int, long, int ret, size_t* processed) {
  if (oper == (BIO_CB_READ | BIO_CB_RETURN) && ret > 0 && processed && argp) {
    auto* first = reinterpret_cast<Bytes*>(BIO_get_callback_arg(b));
    const size_t n = std::min(*processed, Channel::kFirstBytes - std::min(first->size(), Channel::kFirstBytes));
    first->insert(first->end(), reinterpret_cast<const uint8_t*>(argp), reinterpret_cast<const uint8_t*>(argp) + n);
  }
  return ret;
}

}  // namespace

Result<std::unique_ptr<Channel>> Channel::start(std::shared_ptr<Context> context, int fd) {
  std::unique_ptr<Channel> ch(new Channel());
  ch->fd_ = fd;
  ch->context_ = std::move(context);
  SSL* ssl = SSL_new(ctx_of(ch->context_->ctx_));
  if (!ssl) return Error(Errc::io, openssl_error("tls: connection"));
  ch->ssl_ = ssl;
  if (SSL_set_fd(ssl, fd) != 1) return Error(Errc::io, openssl_error("tls: connection"));
  SSL_set_app_data(ssl, ch.get());
  if (ch->context_->role() == Context::server) {
    SSL_set_accept_state(ssl);
  } else {
    SSL_set_connect_state(ssl);
    BIO* rbio = SSL_get_rbio(ssl);
    BIO_set_callback_arg(rbio, reinterpret_cast<char*>(&ch->first_));
    BIO_set_callback_ex(rbio, record_first);
  }
  return ch;
}

Channel::~Channel() {
  SSL_free(ssl_of(ssl_));
  if (fd_ >= 0) ::close(fd_);
}

Result<Channel::Io> Channel::io_result(int ret, const char* what) {
  switch (SSL_get_error(ssl_of(ssl_), ret)) {
    case SSL_ERROR_WANT_READ: return Io::want_read;
    case SSL_ERROR_WANT_WRITE: return Io::want_write;
    case SSL_ERROR_ZERO_RETURN: return Io::closed;
    case SSL_ERROR_SYSCALL:
      if (ERR_peek_last_error() == 0) {  // the peer closed the socket without close_notify
        ERR_clear_error();
        if (errno == EINTR || errno == EAGAIN) return Io::want_read;
        return Io::closed;
      }
      break;
    default: break;
  }
  if (!refusal_.empty()) return Error(Errc::unauthenticated, "the other end's key was refused: " + refusal_);
  const unsigned long e = ERR_peek_last_error();
  const int reason = ERR_GET_REASON(e);
  if (reason == SSL_R_SSLV3_ALERT_BAD_CERTIFICATE || reason == SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED ||
      reason == SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN)
    return Error(Errc::unauthenticated, openssl_error("the other end refused this end's key"));
  return Error(Errc::unreachable, openssl_error(what));
}

Result<Channel::Io> Channel::handshake() {
  if (ready_) return Io::done;
  ERR_clear_error();
  const int r = SSL_do_handshake(ssl_of(ssl_));
  if (r == 1) {
    ready_ = true;
    BIO_set_callback_ex(SSL_get_rbio(ssl_of(ssl_)), nullptr);  // its reads cost nothing more
    return Io::done;
  }
  auto io = io_result(r, "tls handshake");
  if (io.ok() && *io == Io::closed) {
    closed_in_handshake_ = true;
    return Error(Errc::unreachable, "the other end closed the connection during the TLS handshake");
  }
  return io;
}

void Channel::queue(Bytes&& own, ByteView view) {
  Piece p;
  p.own = std::move(own);
  p.view = p.own.empty() ? view : ByteView(p.own);
  out_bytes_ += p.view.size();
  if (!p.view.empty()) out_.push_back(std::move(p));
}

// The frame's head and header in one piece; data up to kInlineData joins them (one record
// for a small frame), larger data is its own piece.
Bytes Channel::head(wire::MsgType type, ByteView header, ByteView data, bool with_data) {
  Bytes b = wire::encode_frame(type, header, with_data ? data : ByteView());
  if (!with_data) {  // the head's data_len is the whole data's (wire-protocol.md 2.2)
    const uint64_t n = data.size();
    for (int i = 0; i < 8; ++i) b[8 + i] = uint8_t(n >> (8 * i));  // little-endian
  }
  return b;
}

Result<Channel::Io> Channel::send(wire::MsgType type, ByteView header, ByteView data) {
  const bool small = data.size() <= kInlineData;
  queue(head(type, header, data, small), {});
  if (!small) queue(Bytes(data.begin(), data.end()), {});
  return sent();
}

Result<Channel::Io> Channel::send_owned(wire::MsgType type, ByteView header, Bytes&& data) {
  const bool small = data.size() <= kInlineData;
  queue(head(type, header, data, small), {});
  if (!small) queue(std::move(data), {});
  return sent();
}

Result<Channel::Io> Channel::send_view(wire::MsgType type, ByteView header, ByteView data) {
  const bool small = data.size() <= kInlineData;
  queue(head(type, header, data, small), {});
  if (!small) queue({}, data);
  return sent();
}

Result<Channel::Io> Channel::sent() {
  if (held_ && out_bytes_ < kHoldLimit) return Io::want_write;
  return flush();
}

bool Channel::buffered() const { return SSL_has_pending(ssl_of(ssl_)) == 1; }

// A TLS record carries at most 16 KiB: pieces that fit one together are copied into one.
void Channel::coalesce() {
  constexpr size_t kRecord = 16 * 1024;
  // Not while OpenSSL waits to retry a write: that takes the same bytes again.
  if (retrying_ || out_at_ != 0 || out_.size() < 2 || out_[0].view.size() + out_[1].view.size() > kRecord) return;
  Bytes joined;
  joined.reserve(kRecord);
  while (!out_.empty() && joined.size() + out_.front().view.size() <= kRecord) {
    const ByteView v = out_.front().view;
    joined.insert(joined.end(), v.begin(), v.end());
    release_large(std::move(out_.front().own));
    out_.pop_front();
  }
  Piece p;
  p.own = std::move(joined);
  p.view = ByteView(p.own);
  out_.push_front(std::move(p));
}

Result<Channel::Io> Channel::flush() {
  while (!out_.empty()) {
    coalesce();
    Piece& p = out_.front();
    size_t written = 0;
    clear_errors();
    const int r = SSL_write_ex(ssl_of(ssl_), p.view.data() + out_at_, p.view.size() - out_at_, &written);
    retrying_ = r != 1;
    if (r != 1) {
      auto io = io_result(r, "tls write");
      if (io.ok() && *io == Io::closed) return Error(Errc::unreachable, "the other end closed the connection");
      return io;
    }
    out_at_ += written;
    out_bytes_ -= written;
    if (out_at_ == p.view.size()) {
      release_large(std::move(p.own));  // a large reply's pages serve the next one
      out_.pop_front();
      out_at_ = 0;
    }
  }
  return Io::done;
}

Result<Channel::Io> Channel::fill(uint8_t* to, size_t want, size_t* got) {
  while (*got < want) {
    size_t n = 0;
    clear_errors();
    const int r = SSL_read_ex(ssl_of(ssl_), to + *got, want - *got, &n);
    if (r != 1) return io_result(r, "tls read");
    *got += n;
    received_ += n;
  }
  return Io::done;
}

Result<Channel::Io> Channel::receive(wire::Frame& f, uint64_t max_data) {
  if (!in_body_) {
    auto io = fill(head_, sizeof head_, &head_got_);
    XC_TRY(io);
    if (*io == Io::closed && head_got_ != 0) return Error(Errc::unreachable, "the other end closed the connection inside a frame");
    if (*io != Io::done) return *io;
    auto h = wire::decode_frame_head(ByteView(head_, sizeof head_), max_data);
    XC_TRY(h);
    f.type = h->type;
    f.header.resize(h->header_len);
    f.data.clear();
    data_len_ = h->data_len;
    header_got_ = data_got_ = 0;
    in_body_ = true;
  }
  auto io = fill(f.header.data(), f.header.size(), &header_got_);
  XC_TRY(io);
  // The data's buffer grows with what has arrived (to twice that, or kFirstData), unless it
  // or a pooled buffer holds the whole frame already: a frame's length is the sender's
  // claim, and memory is given for bytes, not claims.
  while (*io == Io::done && data_got_ < data_len_) {
    if (data_got_ == f.data.size()) {
      if (f.data.capacity() < data_len_) {
        if (Bytes kept = take_kept(data_len_); kept.capacity() >= data_len_) {
          kept.resize(data_len_);  // zero fills only past the size of its last use
          if (data_got_ != 0) std::memcpy(kept.data(), f.data.data(), data_got_);
          release_large(std::move(f.data));
          f.data = std::move(kept);
        }
      }
      const uint64_t n = f.data.capacity() >= data_len_ ? data_len_
                                                        : std::min<uint64_t>(data_len_, std::max<uint64_t>(kFirstData, 2 * data_got_));
      if (n >= kLargeBuffer && f.data.capacity() < n) {  // pooled pages, already mapped (large_buffers.h)
        Bytes b = take_large(n);
        std::memcpy(b.data(), f.data.data(), data_got_);
        release_large(std::move(f.data));
        f.data = std::move(b);
      } else {
        f.data.resize(n);
      }
    }
    io = fill(f.data.data(), f.data.size(), &data_got_);
    XC_TRY(io);
  }
  if (*io == Io::closed) return Error(Errc::unreachable, "the other end closed the connection inside a frame");
  if (*io != Io::done) return *io;
  in_body_ = false;
  head_got_ = 0;
  return Io::done;
}

void Channel::close() {
  if (!ssl_ || !ready_) return;
  ERR_clear_error();
  (void)SSL_shutdown(ssl_of(ssl_));
  ERR_clear_error();
}

}  // namespace xcargo::tls
