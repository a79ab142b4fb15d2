// The key service's protocol: one SOCK_SEQPACKET packet per request and per reply, between a
// worker and the key service of the same loader (built together: no version). Requests are
// untrusted (a kernel in the worker may write its own); the service answers only these three
// shapes, so that its signature is only ever over a handshake proof or a certificate it made
// itself, of kCertifiedFor.
//
//   request  u8 kind | u64 id | fields                     (little-endian id)
//     kind 1, node proof:   client nonce[32] | server nonce[32]
//     kind 2, client proof: my nonce[32] | their nonce[32] | their node key[32]
//     kind 3, certificate:  a TLS key[32] (the worker's ephemeral Ed25519 key)
//   reply    u8 status | u64 id (the request's; 0 if it had none) | body
//     status 0, signed:  signature[64]
//     status 1, refused: the reason, text (at most kMaxReason bytes)
//     status 2, certified: u16 n | the TLS key's certificate by the node key (DER, n bytes) |
//                          the node key's own, self-signed (DER)
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "keys/node_key.h"
#include "xcargo/types.h"

namespace xcargo::loader::keys::protocol {

enum Kind : uint8_t { kNodeProof = 1, kClientProof = 2, kCertificate = 3 };
inline constexpr size_t kNodeProofSize = 1 + 8 + 32 + 32;
inline constexpr size_t kClientProofSize = 1 + 8 + 32 + 32 + 32;
inline constexpr size_t kCertificateSize = 1 + 8 + 32;
inline constexpr size_t kMaxReason = 200;
// The largest request the service reads: a longer one is cut to it, and refused.
inline constexpr size_t kMaxPacket = 256;
// The largest reply a worker reads (two certificates of about 300 bytes each).
inline constexpr size_t kMaxReply = 2048;

Bytes node_proof_request(uint64_t id, const wire::Nonce& client_nonce, const wire::Nonce& server_nonce);
Bytes client_proof_request(uint64_t id, const wire::Nonce& my_nonce, const wire::Nonce& their_nonce,
                           const wire::RawKey& their_node_key);
Bytes certificate_request(uint64_t id, const wire::RawKey& tls_key);

// The service's reply to one request packet, signed with `key` if the request is one of the
// three shapes, exactly (a client proof only if `client_proofs`: a node in a cluster proves its
// key to its peers, a node alone to nobody); refused otherwise.
Bytes answer(const NodeKey& key, ByteView request, bool client_proofs = true);

// A refusal, for a request too long to be read whole (the service reads at most kMaxPacket).
Bytes refusal(uint64_t id, std::string_view why);

struct Reply {
  uint64_t id = 0;
  std::optional<wire::Sig> signature;       // a proof
  std::optional<CertifiedKey> certificate;  // a certificate
  std::string reason;                       // neither: refused, why
};
// nullopt: not a reply of this protocol.
std::optional<Reply> parse_reply(ByteView packet);

}  // namespace xcargo::loader::keys::protocol
