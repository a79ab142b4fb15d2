// The node's identity as a worker's handshakes use it: the public key, and the two proofs a
// handshake needs, signed with a private key the worker never holds (loader/SECURITY.md,
// "The node key"): the key service's process holds it, a worker only a connection to it.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>

#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "auth/auth.h"
#include "xcargo/error.h"
#include "xcargo/identity.h"
#include "net/tls.h"
#include "xcargo/trust.h"
#include "wire/wire.h"

namespace xcargo::loader::keys {

// How long a certificate of a worker's TLS key is valid: a worker renews its key well before
// (tls_credential), and one taken from a worker (a kernel that read its memory) serves for
// at most this long after.
inline constexpr std::chrono::hours kCertifiedFor{2};

// A TLS key's certificate by the node key, and the node key's own (self-signed): the chain a
// worker shows (DER each).
struct CertifiedKey {
  Bytes tls_key, node_key;
};

class NodeKey {
public:
  virtual ~NodeKey() = default;
  virtual const PublicKey& public_key() const = 0;
  // hello_reply's signature: auth::node_proof(client_nonce, server_nonce, this node's key).
  [[nodiscard]] virtual Result<wire::Sig> node_proof(const wire::Nonce& client_nonce, const wire::Nonce& server_nonce) const = 0;
  // This node's auth to a peer node: auth::client_proof(my_nonce, their_nonce, their_node_key,
  // this node's key).
  [[nodiscard]] virtual Result<wire::Sig> client_proof(const wire::Nonce& my_nonce, const wire::Nonce& their_nonce,
                                                       const wire::RawKey& their_node_key) const = 0;
  // A certificate of tls_key by this node's key, for kCertifiedFor.
  [[nodiscard]] virtual Result<CertifiedKey> certify(const wire::RawKey& tls_key) const = 0;
  // A fresh TLS key and its chain, certified by this node's key (libcargo/net/tls.h): what a
  // worker's TLS listener shows, renewed before kCertifiedFor passes.
  [[nodiscard]] Result<tls::Credential> tls_credential() const;
};

// A key held in this process: the key service's own, and unit tests'.
class HeldKey final : public NodeKey {
public:
  explicit HeldKey(SigningKey key) : key_(std::move(key)) {}
  const PublicKey& public_key() const override { return key_.public_key(); }
  Result<wire::Sig> node_proof(const wire::Nonce& client_nonce, const wire::Nonce& server_nonce) const override;
  Result<wire::Sig> client_proof(const wire::Nonce& my_nonce, const wire::Nonce& their_nonce,
                                 const wire::RawKey& their_node_key) const override;
  Result<CertifiedKey> certify(const wire::RawKey& tls_key) const override;

private:
  SigningKey key_;
};

// A key held by the key service, asked over fd (a connection from KeyService::connect, which
// this object owns). Calls from several threads take turns; each waits at most `limit` for
// its answer, and an answer that is not to its own question (something else wrote on the
// connection: a kernel, say) is skipped: each question has a random id, and answers queued
// before it are dropped. on_lost runs (once per failed call) when the
// connection is gone: shut down by a kernel, say, or the service ended.
class ServiceKey final : public NodeKey {
public:
  ServiceKey(int fd, PublicKey key, std::chrono::milliseconds limit, std::function<void()> on_lost = {});
  ~ServiceKey() override;
  ServiceKey(const ServiceKey&) = delete;
  ServiceKey& operator=(const ServiceKey&) = delete;
  const PublicKey& public_key() const override { return key_; }
  Result<wire::Sig> node_proof(const wire::Nonce& client_nonce, const wire::Nonce& server_nonce) const override;
  Result<wire::Sig> client_proof(const wire::Nonce& my_nonce, const wire::Nonce& their_nonce,
                                 const wire::RawKey& their_node_key) const override;
  Result<CertifiedKey> certify(const wire::RawKey& tls_key) const override;

private:
  struct Answer {  // the service's: a signature or certificates
    std::optional<wire::Sig> signature;
    std::optional<CertifiedKey> certificate;
  };
  Result<Answer> ask(uint64_t id, Bytes request) const;
  const int fd_;
  const PublicKey key_;
  const std::chrono::milliseconds limit_;
  const std::function<void()> on_lost_;
  mutable std::mutex mu_;
};

}  // namespace xcargo::loader::keys
