// AuthGate: challenge, proof and per-request checks of loader connections.
#include "server/auth_gate.h"

#include <openssl/crypto.h>

#include <algorithm>

namespace xcargo::loader {

using namespace wire;

namespace {
constexpr uint16_t kNever = 0xffff;  // verbs_needed of what is not a request
}  // namespace

uint16_t verbs_needed(MsgType type) {
  switch (type) {
    case MsgType::hello: case MsgType::auth: return 0;
    case MsgType::push: return auth::kPush;
    case MsgType::has: return auth::kPush | auth::kRun;  // either
    case MsgType::invoke: case MsgType::cancel: return auth::kRun;
    case MsgType::lane: case MsgType::kick: return auth::kRun | auth::kForward;  // either: clients' and peers' lanes
    case MsgType::list: case MsgType::stats: return auth::kList;
    case MsgType::region: case MsgType::region_read: return auth::kRead;
    case MsgType::forward: case MsgType::relay: return auth::kForward;
    default: return kNever;  // replies and unknown types
  }
}

AuthGate::AuthGate(std::shared_ptr<const keys::NodeKey> node_key, std::optional<auth::AuthorizedKeys> keys)
    : node_key_(std::move(node_key)), open_(!keys) {
  if (keys) keys_ = std::make_shared<const auth::AuthorizedKeys>(std::move(*keys));
}

void AuthGate::set_keys(auth::AuthorizedKeys keys) {
  if (!open_) keys_ = std::make_shared<const auth::AuthorizedKeys>(std::move(keys));
}

Status AuthGate::greet(Session& s, const Hello& hello, HelloReply& reply) const {
  auto nonce = auth::random_nonce();
  XC_TRY(nonce);
  s.client_nonce = hello.nonce;
  s.server_nonce = *nonce;
  s.greeted = true;
  s.authenticated = false;
  s.verbs = !open_ ? 0 : uint16_t(auth::kAllClientVerbs | auth::kForward);  // open: as before authentication existed
  s.who.clear();
  reply.auth = mode();
  reply.nonce = s.server_nonce;
  reply.node_key = node_key_->public_key().raw;
  auto sig = node_key_->node_proof(s.client_nonce, s.server_nonce);
  XC_TRY(sig);
  reply.node_sig = *sig;
  return {};
}

AuthReply AuthGate::check(Session& s, const Auth& a, std::string* line) const {
  AuthReply r;
  r.request_id = a.request_id;
  PublicKey presented;
  presented.raw = a.client_key;
  presented.id = key_id_of(a.client_key);
  const std::string id = to_hex(presented.id);
  auto refuse = [&](const std::string& why) {
    r.status = ReplyStatus::unauthenticated;
    r.message = why;
    *line = "key " + id + ": " + why;
    return r;
  };
  if (!s.greeted) return refuse("auth before hello");
  if (s.proven && *s.proven != a.client_key) return refuse("not the key this connection's TLS handshake proved");
  if (s.authenticated) return refuse("this connection already authenticated as " + s.who);
  const std::shared_ptr<const auth::AuthorizedKeys> keys = keys_.load();  // k points into them
  const auth::AuthorizedKey* k = keys ? keys->find(a.client_key) : nullptr;
  if (!open_ && !k) return refuse("the key is not among the node's authorized clients");
  if (!ed25519_verify(presented, auth::client_proof(s.client_nonce, s.server_nonce, node_key_->public_key().raw, a.client_key),
                      a.signature))
    return refuse("the signature does not verify (a replayed or forged proof?)");
  auto token = auth::random_nonce();
  if (!token.ok()) return refuse("no random bytes for a session token");
  std::copy_n(token->begin(), s.token.size(), s.token.begin());
  r.token = s.token;
  s.authenticated = true;
  if (k) s.verbs = k->verbs;  // an open node keeps granting everything
  s.who = "key " + id + (k ? " (" + k->name + ")" : "");
  r.verbs = s.verbs;
  *line = s.who + ": may " + auth::verbs_text(s.verbs);
  return r;
}

bool AuthGate::sealed(const Session& s, ByteView header, ByteView* body) {
  if (header.size() < kTokenSize ||
      CRYPTO_memcmp(header.data() + header.size() - kTokenSize, s.token.data(), kTokenSize) != 0)
    return false;
  *body = header.first(header.size() - kTokenSize);
  return true;
}

bool AuthGate::permits(const Session& s, MsgType type) const {
  const uint16_t need = verbs_needed(type);
  if (need == kNever) return false;
  if (need == 0 || open_) return true;  // an open node serves everyone, as before authentication
  return s.authenticated && (s.verbs & need) != 0;
}

bool AuthGate::is_peer_key(const RawKey& key) const {
  if (open_) return true;
  const std::shared_ptr<const auth::AuthorizedKeys> keys = keys_.load();
  const auth::AuthorizedKey* k = keys ? keys->find(key) : nullptr;
  return k && (k->verbs & auth::kForward);
}

bool AuthGate::admits(const RawKey& key, bool node, std::string* why) const {
  if (open_) return true;
  const std::shared_ptr<const auth::AuthorizedKeys> keys = keys_.load();
  const auth::AuthorizedKey* k = keys ? keys->find(key) : nullptr;
  const std::string id = to_hex(key_id_of(key));
  if (!k) return *why = (node ? "node key " : "key ") + id + " is not among the node's authorized keys", false;
  if (node && !(k->verbs & auth::kForward)) return *why = "node key " + id + " may not forward to this node", false;
  return true;
}

std::string AuthGate::refusal(const Session& s, MsgType type) const {
  if (!s.greeted) return "this node serves only authenticated clients: hello and authenticate first";
  if (!s.authenticated) return "this node serves only authenticated clients: authenticate first";
  return s.who + " may " + auth::verbs_text(s.verbs) + ", not " + auth::verbs_text(verbs_needed(type));
}

}  // namespace xcargo::loader
