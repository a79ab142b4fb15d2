// Connection authentication (format-spec/wire-protocol.md section 7): what each side signs,
// the verbs a client key may use, and the loader's list of authorized client keys.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "xcargo/error.h"
#include "xcargo/trust.h"
#include "xcargo/types.h"

namespace xcargo::auth {

using Nonce = std::array<uint8_t, 32>;
using Signature = std::array<uint8_t, 64>;

// A fresh random nonce (OpenSSL RAND_bytes).
Result<Nonce> random_nonce();

// What the loader signs with its node key in hello_reply, and what the client signs with
// its identity in auth: both nonces and both identities, so that neither can be replayed to
// another connection or another node.
Bytes node_proof(const Nonce& client_nonce, const Nonce& server_nonce, const std::array<uint8_t, 32>& node_key);
Bytes client_proof(const Nonce& client_nonce, const Nonce& server_nonce, const std::array<uint8_t, 32>& node_key,
                   const std::array<uint8_t, 32>& client_key);

// What an authenticated key may ask for: bits of a u16 on the wire.
enum Verb : uint16_t {
  kPush = 1,     // push, has
  kRun = 2,      // invoke, has
  kList = 4,     // list, stats
  kRead = 8,     // region, region_read
  kForward = 16, // forward: cluster peers
};
inline constexpr uint16_t kAllClientVerbs = kPush | kRun | kList | kRead;
// "push,run,ls,read,forward" <-> bits; unknown names are errors.
Result<uint16_t> parse_verbs(std::string_view list);
std::string verbs_text(uint16_t verbs);

struct AuthorizedKey {
  PublicKey key;
  uint16_t verbs = kAllClientVerbs;
  std::string name;    // the line's comment or the .pub file's name, for logs
  std::string tenant;  // the line's tenant=NAME: keys that share their work (empty: none named)
};

// A tenant's name: 1 to 32 of [a-z0-9_-], starting with a letter or digit (it names a log
// tag, a cache directory and a claim on the wire).
bool is_tenant_name(std::string_view name);
inline constexpr size_t kMaxTenantName = 32;

// The keys a loader accepts (its `clients` setting), in the spirit of OpenSSH's
// authorized_keys. PATH is either
//   a directory: every *.pub file in it is a key with the client verbs (push, run, ls, read);
//   any other entry is no key, and ignored() says which and why (for the loader's log);
//   a file of lines "[verbs=LIST] [tenant=TENANT] KEY [NAME]", KEY being the base64 line of
//   a .pub file (its second line), '#' starting a comment; keys with the same TENANT share
//   their tenant (loader/README.md, "Tenants").
// Errors name the file and line; nothing is skipped silently.
class AuthorizedKeys {
public:
  static Result<AuthorizedKeys> load(const std::string& path);
  static Result<AuthorizedKeys> parse(std::string_view text, const std::string& origin);
  void add(AuthorizedKey k) { keys_.push_back(std::move(k)); }
  const AuthorizedKey* find(const std::array<uint8_t, 32>& raw) const;
  size_t size() const { return keys_.size(); }
  const std::vector<AuthorizedKey>& keys() const { return keys_; }
  // The entries of a clients directory that hold no key, each "PATH: why, and what a clients
  // directory expects", in directory order; empty for a file.
  const std::vector<std::string>& ignored() const { return ignored_; }

private:
  std::vector<AuthorizedKey> keys_;
  std::vector<std::string> ignored_;
};

// The line for an authorized-keys file that grants key these verbs (in tenant, if not empty).
std::string authorized_line(const PublicKey& key, uint16_t verbs, const std::string& name, const std::string& tenant = {});

// Where a client finds its identity: $XCARGO_IDENTITY, else ~/.config/xcargo/identity if it
// exists; empty when there is none.
std::string default_identity_path();

}  // namespace xcargo::auth
