// Ed25519 public keys and the trust store a cargo's signatures are checked against.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "xcargo/error.h"
#include "xcargo/rules.h"
#include "xcargo/types.h"

namespace xcargo {

struct PublicKey {
  std::array<uint8_t, 32> raw{};
  KeyId id{};
  std::string source;  // file it came from, for messages
};

KeyId key_id_of(const std::array<uint8_t, 32>& raw);

// Reads a PEM "PUBLIC KEY" (SubjectPublicKeyInfo) holding an Ed25519 key.
Result<PublicKey> load_public_key(const std::string& path);
Result<PublicKey> public_key_from_pem(std::string_view pem, const std::string& source);
// Writes a key in the same PEM form.
std::string public_key_to_pem(const PublicKey& key);

// The name of the revocation list in a trust directory: key ids (16 hex digits, as
// `xcargo inspect` shows them), one per line; '#' starts a comment.
inline constexpr const char* kRevocationList = "revoked.txt";

// The refusal of a cargo whose signers this verifier trusts are all revoked (Errc::untrusted),
// with hints for that case: what revocation means, how an admin undoes it, and that the cargo
// needs a signature by a key that is trusted and not revoked. ids: the revoked signers' key ids.
Error revoked_signers_error(const std::string& ids);
// Whether a refusal's message (as a node sends it, without its hints) is the one of
// revoked_signers_error: a client then adds revoked_signer_hints() itself.
bool is_revoked_signers_message(std::string_view message);
std::vector<std::string> revoked_signer_hints();

class TrustStore {
public:
  // PATH is one .pub file or a directory whose *.pub files are all loaded, with its
  // revocation list and cargo rules (xcargo/rules.h) if it has them. An unreadable or
  // non-Ed25519 .pub file, or a malformed line in the list or the rules, is an error, never
  // silently skipped.
  static Result<TrustStore> load(const std::string& path);

  void add(PublicKey key);
  void revoke(const KeyId& id);
  // A trusted key that is not revoked, or nullptr.
  const PublicKey* find(const KeyId& id) const;
  bool revoked(const KeyId& id) const;
  size_t size() const { return keys_.size(); }
  const std::vector<PublicKey>& keys() const { return keys_; }
  // Single cargos revoked by digest and minimum versions (load_cargo applies them).
  const CargoRules& rules() const { return rules_; }
  void set_rules(CargoRules rules) { rules_ = std::move(rules); }

private:
  std::vector<PublicKey> keys_;
  CargoRules rules_;
  std::vector<KeyId> revoked_;
};

// Ed25519 verification of msg under key. False on any mismatch.
bool ed25519_verify(const PublicKey& key, ByteView msg, ByteView signature);

}  // namespace xcargo
