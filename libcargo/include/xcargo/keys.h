// Ed25519 signing keys (build side): generation, loading, and adding a signature to a cargo.
#pragma once

#include <memory>
#include <string>

#include "xcargo/error.h"
#include "xcargo/trust.h"
#include "xcargo/types.h"

namespace xcargo {

class SigningKey {
public:
  // Reads a PEM "PRIVATE KEY" (PKCS#8) holding an Ed25519 key, as 'openssl pkey' reads it.
  static Result<SigningKey> load(const std::string& path);
  static Result<SigningKey> from_pem(std::string_view pem, const std::string& source);
  static Result<SigningKey> generate();

  const PublicKey& public_key() const { return public_; }
  std::string private_pem() const;
  Result<std::array<uint8_t, 64>> sign(ByteView message) const;

private:
  std::shared_ptr<void> pkey_;  // EVP_PKEY, kept opaque so this header needs no OpenSSL
  PublicKey public_;
};

// Writes KEY (mode 0600) and KEY.pub. Refuses to overwrite either unless overwrite is set.
Result<SigningKey> generate_key_files(const std::string& path, bool overwrite);

// Adds a signature by key to a cargo and returns the new bytes. The cargo's content must
// pass every check but trust first. If the key already signed it, returns it unchanged and
// sets *already_signed.
Result<Bytes> sign_cargo(ByteView cargo, const SigningKey& key, bool* already_signed = nullptr);

// Appends a signature after checking only the container structure (spec steps 1-3): for
// making test vectors whose manifest or payloads are deliberately wrong. Tools use sign_cargo.
Result<Bytes> add_signature(ByteView cargo, const SigningKey& key);

}  // namespace xcargo
