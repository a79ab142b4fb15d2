// Fuzz target: the key service's reading of a worker's request (which a kernel in the worker
// may write) and the worker's reading of its reply. A request it signs is one of the two
// proofs, exactly sized, and one it certifies a TLS key, exactly sized; every reply it writes
// parses back.
#include <cstdint>
#include <cstdlib>

#include "keys/protocol.h"

using namespace xcargo;
using namespace xcargo::loader::keys;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const HeldKey key(*SigningKey::generate());
  const ByteView in(data, size);
  const Bytes reply = protocol::answer(key, in);
  if (size > 0 && data[0] == protocol::kClientProof && protocol::parse_reply(protocol::answer(key, in, false))->signature) std::abort();
  auto r = protocol::parse_reply(reply);
  if (!r) std::abort();
  const bool exact = size > 0 && ((data[0] == protocol::kNodeProof && size == protocol::kNodeProofSize) ||
                                  (data[0] == protocol::kClientProof && size == protocol::kClientProofSize));
  if (r->signature.has_value() != exact) std::abort();
  const bool certify = size == protocol::kCertificateSize && data[0] == protocol::kCertificate;
  if (r->certificate.has_value() != certify) std::abort();
  (void)protocol::parse_reply(in);
  return 0;
}
