// Who may do what on a loader's connections (loader/SECURITY.md, "Clients"): the node's
// challenge in hello_reply, the client's proof in auth, and the check of every later
// request against the verbs its key was granted. Transport-free, so it is unit-tested.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>

#include "keys/node_key.h"
#include "auth/auth.h"
#include "xcargo/identity.h"
#include "wire/wire.h"

namespace xcargo::loader {

class AuthGate {
public:
  // One connection's state.
  struct Session {
    wire::Nonce client_nonce{}, server_nonce{};
    bool greeted = false;        // hello answered: server_nonce is set
    bool authenticated = false;  // a key proved itself
    uint16_t verbs = 0;          // what this connection may do
    std::string who;             // "key KEYID (NAME)" once authenticated, for log lines
    wire::SessionToken token{};  // once authenticated: ends every later request's header
    // The key the connection's transport proved (a TLS handshake): the only one its auth
    // may present.
    std::optional<wire::RawKey> proven;
  };
  // A connection's session, or an empty one for a request without a connection; a
  // reference (a conditional between a session and Session{} copies the session, its
  // strings included).
  static const Session& session_of(const Session* s) {
    static const Session kNoSession{};
    return s ? *s : kNoSession;
  }
  // Whether header ends with the session's token; *body is what comes before it.
  static bool sealed(const Session& s, ByteView header, ByteView* body);

  // node_key: the node's identity (in a worker, a connection to the key service); keys: the
  // authorized keys; nullopt opens the node to anyone (allow-anyone).
  AuthGate(std::shared_ptr<const keys::NodeKey> node_key, std::optional<auth::AuthorizedKeys> keys);

  wire::AuthMode mode() const { return open_ ? wire::AuthMode::optional : wire::AuthMode::required; }
  const keys::NodeKey& node_key() const { return *node_key_; }
  // Replaces the authorized keys (a reload; safe from any thread): later proofs are checked
  // against them, sessions already authenticated keep what they were granted. An open node
  // stays open.
  void set_keys(auth::AuthorizedKeys keys);

  // Starts the session with hello's challenge and completes the reply: a fresh nonce, the
  // node's key and its signature over both nonces.
  Status greet(Session& s, const wire::Hello& hello, wire::HelloReply& reply) const;
  // Checks a client's proof. The reply says what was decided; *line says which key and why,
  // for the log.
  wire::AuthReply check(Session& s, const wire::Auth& a, std::string* line) const;
  // Whether the session may make a request of this type (hello and auth always; anything
  // on an open node).
  bool permits(const Session& s, wire::MsgType type) const;
  // Why not, for the unauthenticated reply.
  std::string refusal(const Session& s, wire::MsgType type) const;
  // Whether a peer node that proved this node key is one of the cluster's: a key of the
  // authorized keys with the verb forward (the node keys peers forward with). An open node
  // has no such list: any key.
  bool is_peer_key(const wire::RawKey& key) const;
  // Whether a TLS handshake that proved this key may go on (format-spec/wire-protocol.md
  // 2.3): a node's key (certified: a peer worker's) must be a peer key, any other an
  // authorized client's. An open node admits any key. Else *why says why not.
  bool admits(const wire::RawKey& key, bool node, std::string* why) const;

private:
  std::shared_ptr<const keys::NodeKey> node_key_;
  const bool open_;  // allow-anyone: no keys
  std::atomic<std::shared_ptr<const auth::AuthorizedKeys>> keys_;
};

// The verbs a request type needs (auth::Verb bits; 0 for hello and auth).
uint16_t verbs_needed(wire::MsgType type);

}  // namespace xcargo::loader
