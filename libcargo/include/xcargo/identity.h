// Ed25519 private keys: generation, loading, signing (cargo signatures and authentication).
#pragma once

#include <array>
#include <memory>
#include <string>
#include <string_view>

#include "xcargo/error.h"
#include "xcargo/passphrase.h"
#include "xcargo/trust.h"
#include "xcargo/types.h"

namespace xcargo {

class SigningKey {
public:
  // Reads a private key file holding an Ed25519 key, as 'openssl pkey' reads it: PEM
  // "PRIVATE KEY" (PKCS#8), or "ENCRYPTED PRIVATE KEY" (PKCS#8 with a passphrase, any PBES2
  // scheme OpenSSL knows), whose passphrase is then asked of `passphrase` (only then).
  // Refuses, before decoding it or asking for a passphrase, a private key file that
  // check_private_key_permissions refuses.
  // Errors (Errc::key) name the file: "ci.key: wrong passphrase (or damaged key)".
  static Result<SigningKey> load(const std::string& path, const PassphraseSource& passphrase = {});
  // The same from PEM in memory, which has no permissions to check (test vectors' keys).
  static Result<SigningKey> from_pem(std::string_view pem, const std::string& source,
                                     const PassphraseSource& passphrase = {});
  static Result<SigningKey> generate();

  const PublicKey& public_key() const { return public_; }
  std::string private_pem() const;
  // PKCS#8 encrypted under passphrase ("ENCRYPTED PRIVATE KEY"): PBES2 with scrypt
  // (N=2^14, r=8, p=1, a random 16-byte salt) and AES-256-CBC, as
  // 'openssl pkcs8 -topk8 -scrypt' writes it and 'openssl pkey' reads it.
  Result<std::string> encrypted_private_pem(std::string_view passphrase) const;
  Result<std::array<uint8_t, 64>> sign(ByteView message) const;
  // The key as OpenSSL's EVP_PKEY (opaque here), for code that hands it to OpenSSL itself:
  // the TLS channel's certificates (libcargo/net/tls.h).
  void* openssl_pkey() const { return pkey_.get(); }

private:
  std::shared_ptr<void> pkey_;  // EVP_PKEY, kept opaque so this header needs no OpenSSL
  PublicKey public_;
};

// Whether a private key file is private, as OpenSSH checks ("UNPROTECTED PRIVATE KEY FILE"):
// no permission at all for group and others (mode & 077 == 0), and owned by the user who
// loads it (my_uid) or by root. A key that others could read may be in their hands; one
// that others could write, or that another user owns, may be theirs instead of yours.
// Errors (Errc::key) name the file and mode and hint at the chmod or chown that fixes it.
Status check_private_key_permissions(const std::string& path, unsigned mode, unsigned owner_uid, unsigned my_uid);

// Writes KEY (mode 0600) and KEY.pub. Refuses to overwrite either unless overwrite is set.
// With encrypt, KEY is encrypted (SigningKey::encrypted_private_pem) under a passphrase read
// from it with confirmation, once the paths are known to be free.
Result<SigningKey> generate_key_files(const std::string& path, bool overwrite, const PassphraseSource* encrypt = nullptr);

}  // namespace xcargo
