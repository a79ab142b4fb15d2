// HeldKey signs here; ServiceKey asks the key service (node_key.h).
#include "keys/node_key.h"

#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "keys/protocol.h"

namespace xcargo::loader::keys {

namespace {
Result<wire::Sig> signed_by(const SigningKey& key, const Bytes& proof) {
  auto sig = key.sign(proof);
  if (!sig.ok()) return sig.take_error();
  return *sig;
}
}  // namespace

Result<wire::Sig> HeldKey::node_proof(const wire::Nonce& client_nonce, const wire::Nonce& server_nonce) const {
  return signed_by(key_, auth::node_proof(client_nonce, server_nonce, key_.public_key().raw));
}

Result<wire::Sig> HeldKey::client_proof(const wire::Nonce& my_nonce, const wire::Nonce& their_nonce,
                                        const wire::RawKey& their_node_key) const {
  return signed_by(key_, auth::client_proof(my_nonce, their_nonce, their_node_key, key_.public_key().raw));
}

Result<CertifiedKey> HeldKey::certify(const wire::RawKey& tls_key) const {
  auto leaf = tls::certificate(key_, tls_key, kCertifiedFor);
  XC_TRY(leaf);
  auto root = tls::certificate(key_, key_.public_key().raw, kCertifiedFor);
  XC_TRY(root);
  return CertifiedKey{std::move(*leaf), std::move(*root)};
}

Result<tls::Credential> NodeKey::tls_credential() const {
  auto key = SigningKey::generate();
  XC_TRY(key);
  auto c = certify(key->public_key().raw);
  XC_TRY(c);
  return tls::Credential{std::move(*key), {std::move(c->tls_key), std::move(c->node_key)}};
}

ServiceKey::ServiceKey(int fd, PublicKey key, std::chrono::milliseconds limit, std::function<void()> on_lost)
    : fd_(fd), key_(std::move(key)), limit_(limit), on_lost_(std::move(on_lost)) {}

ServiceKey::~ServiceKey() { ::close(fd_); }

namespace {
// A request id no kernel can guess: the service signs whatever a kernel asks, so a kernel
// that plants answers to ids 1, 2, 3... on its worker's end would break the handshakes after
// it has returned (guarded by key_service_test.cpp, "the key service loads the key and
// serves each worker's connection": 300 planted answers).
uint64_t unguessable_id() {
  uint64_t id = 0;
  while (::getrandom(&id, sizeof id, 0) != ssize_t(sizeof id)) {
  }
  return id;
}
}  // namespace

Result<wire::Sig> ServiceKey::node_proof(const wire::Nonce& client_nonce, const wire::Nonce& server_nonce) const {
  std::lock_guard lock(mu_);
  const uint64_t id = unguessable_id();
  auto a = ask(id, protocol::node_proof_request(id, client_nonce, server_nonce));
  XC_TRY(a);
  if (!a->signature) return Error(Errc::key, "the node's key service answered a proof with certificates");
  return *a->signature;
}

Result<wire::Sig> ServiceKey::client_proof(const wire::Nonce& my_nonce, const wire::Nonce& their_nonce,
                                           const wire::RawKey& their_node_key) const {
  std::lock_guard lock(mu_);
  const uint64_t id = unguessable_id();
  auto a = ask(id, protocol::client_proof_request(id, my_nonce, their_nonce, their_node_key));
  XC_TRY(a);
  if (!a->signature) return Error(Errc::key, "the node's key service answered a proof with certificates");
  return *a->signature;
}

Result<CertifiedKey> ServiceKey::certify(const wire::RawKey& tls_key) const {
  std::lock_guard lock(mu_);
  const uint64_t id = unguessable_id();
  auto a = ask(id, protocol::certificate_request(id, tls_key));
  XC_TRY(a);
  if (!a->certificate) return Error(Errc::key, "the node's key service answered a certificate request with a signature");
  return std::move(*a->certificate);
}

// Under mu_.
Result<ServiceKey::Answer> ServiceKey::ask(uint64_t id, Bytes request) const {
  auto failed = [](const std::string& what) {
    return Error(Errc::key, "the node's key service " + what + ": this node cannot prove its key")
        .hint("the loader stops when its key service ends; restart it");
  };
  auto lost = [&](int err) {
    if (on_lost_) on_lost_();
    return failed(err == EPIPE || err == ECONNRESET ? "is gone" : std::string("cannot be reached: ") + std::strerror(err));
  };
  uint8_t packet[protocol::kMaxReply];
  // What is queued now answers nothing this asks (a kernel's own requests, say): dropped.
  for (int i = 0; i < 4096 && ::recv(fd_, packet, sizeof packet, MSG_DONTWAIT) > 0; ++i) {
  }
  ssize_t n;
  while ((n = ::send(fd_, request.data(), request.size(), MSG_NOSIGNAL)) < 0 && errno == EINTR) {
  }
  if (n < 0) return lost(errno);
  if (n != ssize_t(request.size())) return failed("took a request in part");
  const auto deadline = std::chrono::steady_clock::now() + limit_;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) return failed("did not answer within " + std::to_string(limit_.count()) + " ms");
    pollfd p{fd_, POLLIN, 0};
    const int r = ::poll(&p, 1, int(left));
    if (r <= 0) continue;  // EINTR, or the time is up (checked above)
    n = ::recv(fd_, packet, sizeof packet, MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;  // someone else read it first
    if (n == 0) return lost(EPIPE);
    if (n < 0) return lost(errno);
    auto reply = protocol::parse_reply(ByteView(packet, size_t(n)));
    if (!reply || reply->id != id) continue;  // not the answer to this question
    if (!reply->signature && !reply->certificate) return Error(Errc::key, "the node's key service refused: " + reply->reason);
    return Answer{reply->signature, std::move(reply->certificate)};
  }
}

}  // namespace xcargo::loader::keys
