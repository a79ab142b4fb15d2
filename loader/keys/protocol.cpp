// The key service's request and reply packets (protocol.h).
#include "keys/protocol.h"

#include <algorithm>
#include <cstring>

namespace xcargo::loader::keys::protocol {

namespace {

void put_id(Bytes& b, uint64_t id) {
  for (int i = 0; i < 8; ++i) b.push_back(uint8_t(id >> (8 * i)));
}
uint64_t get_id(const uint8_t* p) {
  uint64_t id = 0;
  for (int i = 0; i < 8; ++i) id |= uint64_t(p[i]) << (8 * i);
  return id;
}
template <size_t N>
void put(Bytes& b, const std::array<uint8_t, N>& a) {
  b.insert(b.end(), a.begin(), a.end());
}
template <size_t N>
std::array<uint8_t, N> get(const uint8_t* p) {
  std::array<uint8_t, N> a;
  std::memcpy(a.data(), p, N);
  return a;
}

}  // namespace

Bytes refusal(uint64_t id, std::string_view why) {
  Bytes b{1};
  put_id(b, id);
  why = why.substr(0, kMaxReason);
  b.insert(b.end(), why.begin(), why.end());
  return b;
}

Bytes node_proof_request(uint64_t id, const wire::Nonce& client_nonce, const wire::Nonce& server_nonce) {
  Bytes b{kNodeProof};
  put_id(b, id);
  put(b, client_nonce);
  put(b, server_nonce);
  return b;
}

Bytes client_proof_request(uint64_t id, const wire::Nonce& my_nonce, const wire::Nonce& their_nonce,
                           const wire::RawKey& their_node_key) {
  Bytes b{kClientProof};
  put_id(b, id);
  put(b, my_nonce);
  put(b, their_nonce);
  put(b, their_node_key);
  return b;
}

Bytes certificate_request(uint64_t id, const wire::RawKey& tls_key) {
  Bytes b{kCertificate};
  put_id(b, id);
  put(b, tls_key);
  return b;
}

Bytes answer(const NodeKey& key, ByteView r, bool client_proofs) {
  const uint64_t id = r.size() >= 9 ? get_id(r.data() + 1) : 0;
  if (!r.empty() && r[0] == kClientProof && !client_proofs)
    return refusal(id, "this node is in no cluster: it proves its key to no peer");
  if (!r.empty() && r[0] == kCertificate && r.size() == kCertificateSize) {
    auto c = key.certify(get<32>(r.data() + 9));
    if (!c.ok()) return refusal(id, c.error().message());
    if (c->tls_key.size() > 0xffff || 9 + 2 + c->tls_key.size() + c->node_key.size() > kMaxReply)
      return refusal(id, "the certificates are too long for a reply");
    Bytes b{2};
    put_id(b, id);
    b.push_back(uint8_t(c->tls_key.size()));
    b.push_back(uint8_t(c->tls_key.size() >> 8));
    b.insert(b.end(), c->tls_key.begin(), c->tls_key.end());
    b.insert(b.end(), c->node_key.begin(), c->node_key.end());
    return b;
  }
  Result<wire::Sig> sig = Error(Errc::malformed, "");
  if (!r.empty() && r[0] == kNodeProof && r.size() == kNodeProofSize)
    sig = key.node_proof(get<32>(r.data() + 9), get<32>(r.data() + 41));
  else if (!r.empty() && r[0] == kClientProof && r.size() == kClientProofSize)
    sig = key.client_proof(get<32>(r.data() + 9), get<32>(r.data() + 41), get<32>(r.data() + 73));
  else
    return refusal(id, r.empty() || (r[0] != kNodeProof && r[0] != kClientProof && r[0] != kCertificate)
                           ? "not a request the key service answers (it signs node and client proofs and certifies TLS keys only)"
                           : "a request of " + std::to_string(r.size()) + " bytes, not the " +
                                 std::to_string(r[0] == kNodeProof    ? kNodeProofSize
                                                : r[0] == kClientProof ? kClientProofSize
                                                                       : kCertificateSize) +
                                 " its kind has");
  if (!sig.ok()) return refusal(id, sig.error().message());
  Bytes b{0};
  put_id(b, id);
  put(b, *sig);
  return b;
}

std::optional<Reply> parse_reply(ByteView p) {
  if (p.size() < 9 || p.size() > kMaxReply) return std::nullopt;
  Reply r;
  r.id = get_id(p.data() + 1);
  if (p[0] == 0 && p.size() == 9 + 64) {
    r.signature = get<64>(p.data() + 9);
    return r;
  }
  if (p[0] == 2 && p.size() >= 11) {
    const size_t n = size_t(p[9]) | size_t(p[10]) << 8;
    if (n == 0 || 11 + n >= p.size()) return std::nullopt;
    r.certificate.emplace();
    r.certificate->tls_key.assign(p.begin() + 11, p.begin() + 11 + long(n));
    r.certificate->node_key.assign(p.begin() + 11 + long(n), p.end());
    return r;
  }
  if (p[0] != 1 || p.size() > 9 + kMaxReason) return std::nullopt;
  r.reason.assign(reinterpret_cast<const char*>(p.data() + 9), p.size() - 9);
  return r;
}

}  // namespace xcargo::loader::keys::protocol
