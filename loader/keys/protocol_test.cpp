// The key service's packets: what it signs, and what it refuses.
#include "keys/protocol.h"

#include <catch2/catch.hpp>

#include "support.h"
#include "auth/auth.h"

using namespace xcargo;
using namespace xcargo::loader::keys;

namespace {
wire::Nonce nonce(uint8_t b) {
  wire::Nonce n;
  n.fill(b);
  return n;
}
}  // namespace

TEST_CASE("the key service signs the two proofs, certifies TLS keys, and nothing else", "[keys]") {
  const SigningKey node = test::fresh_key(), peer = test::fresh_key();
  const HeldKey key(node);

  auto r = protocol::parse_reply(protocol::answer(key, protocol::node_proof_request(7, nonce(1), nonce(2))));
  REQUIRE(r);
  CHECK(r->id == 7);
  REQUIRE(r->signature);
  CHECK(ed25519_verify(node.public_key(), auth::node_proof(nonce(1), nonce(2), node.public_key().raw), *r->signature));

  r = protocol::parse_reply(protocol::answer(key, protocol::client_proof_request(8, nonce(3), nonce(4), peer.public_key().raw)));
  REQUIRE(r);
  CHECK(r->id == 8);
  REQUIRE(r->signature);
  CHECK(ed25519_verify(node.public_key(), auth::client_proof(nonce(3), nonce(4), peer.public_key().raw, node.public_key().raw),
                       *r->signature));

  // A node in no cluster signs no client proof: a kernel could have one made for a handshake
  // with some other node that a process elsewhere relays.
  r = protocol::parse_reply(protocol::answer(key, protocol::client_proof_request(8, nonce(3), nonce(4), peer.public_key().raw), false));
  REQUIRE(r);
  CHECK_FALSE(r->signature);
  CHECK(r->reason == "this node is in no cluster: it proves its key to no peer");
  CHECK(protocol::parse_reply(protocol::answer(key, protocol::node_proof_request(7, nonce(1), nonce(2)), false))->signature);

  // Anything else is refused, with the request's id when it has one.
  Bytes longer = protocol::node_proof_request(9, nonce(1), nonce(2));
  longer.push_back(0);
  Bytes shorter = protocol::client_proof_request(10, nonce(1), nonce(2), peer.public_key().raw);
  shorter.pop_back();
  Bytes other_kind = protocol::node_proof_request(11, nonce(1), nonce(2));
  other_kind[0] = 4;
  for (const Bytes& bad : {longer, shorter, other_kind, Bytes{}, Bytes{1}}) {
    auto no = protocol::parse_reply(protocol::answer(key, bad));
    REQUIRE(no);
    CHECK_FALSE(no->signature);
    CHECK_FALSE(no->reason.empty());
  }
  CHECK(protocol::parse_reply(protocol::answer(key, longer))->id == 9);
  CHECK(protocol::parse_reply(protocol::answer(key, other_kind))->reason.find("signs node and client proofs and certifies TLS keys only") != std::string::npos);
  CHECK(protocol::parse_reply(protocol::answer(key, shorter))->reason == "a request of 104 bytes, not the 105 its kind has");

  // A TLS key's certificate: the node key's signature over a certificate the service made.
  r = protocol::parse_reply(protocol::answer(key, protocol::certificate_request(12, peer.public_key().raw)));
  REQUIRE(r);
  CHECK(r->id == 12);
  REQUIRE(r->certificate);
  CHECK(r->certificate->tls_key.size() > 100);
  CHECK(r->certificate->node_key.size() > 100);
}

TEST_CASE("a worker reads only whole replies of the key service", "[keys]") {
  CHECK_FALSE(protocol::parse_reply(Bytes{}));
  CHECK_FALSE(protocol::parse_reply(Bytes(9, 0)));        // signed, but no signature
  CHECK_FALSE(protocol::parse_reply(Bytes(9 + 63, 0)));   // a signature cut short
  CHECK_FALSE(protocol::parse_reply(Bytes(9 + 65, 0)));   // one byte too many
  Bytes refusal(9, 0);
  refusal[0] = 1;
  CHECK(protocol::parse_reply(refusal));                  // refused, no reason given
  refusal.resize(9 + protocol::kMaxReason + 1, 'x');
  CHECK_FALSE(protocol::parse_reply(refusal));            // a reason longer than any the service writes
  Bytes unknown(9 + 64, 0);
  unknown[0] = 3;
  CHECK_FALSE(protocol::parse_reply(unknown));
  Bytes certified(9 + 2 + 10, 0);
  certified[0] = 2;
  CHECK_FALSE(protocol::parse_reply(certified));  // a first certificate of 0 bytes
  certified[9] = 10;
  CHECK_FALSE(protocol::parse_reply(certified));  // no second one
  certified[9] = 9;
  CHECK(protocol::parse_reply(certified));
  certified[9] = 0xff;
  CHECK_FALSE(protocol::parse_reply(certified));  // longer than the packet
}
