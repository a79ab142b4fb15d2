// Ed25519 private keys: generation, loading, signing (cargo signatures and authentication).
#pragma once

#include <array>
#include <memory>
#include <string>
#include <string_view>

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

}  // namespace xcargo
