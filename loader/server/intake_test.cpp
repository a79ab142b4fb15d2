// The rules a client's message meets first, driven through a fake server: authentication
// before anything, the session token, and the limits in flight, which trip at exactly 128
// requests on a connection and 512 over a key's connections, whatever the timing.
#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>
#include <vector>

#include "server/intake.h"
#include "keys/node_key.h"
#include "auth/auth.h"

using namespace xcargo;
using namespace xcargo::loader;
using namespace xcargo::wire;

namespace {

Ep ep(uintptr_t n) { return reinterpret_cast<ucp_ep*>(n); }

// The server around Intake: keeps what is sent, answers hellos as a node of kVersion would.
struct FakeServer : IntakeHost {
  struct Sent {
    Ep ep;
    Reply reply;
  };
  std::vector<Sent> sent;
  std::vector<std::string> lines;
  void send(Ep to, Reply&& r) override { sent.push_back({to, std::move(r)}); }
  Reply hello_reply(ByteView) override {
    HelloReply r;
    r.max_cargo = r.max_input = r.max_reply = 1000;
    return {MsgType::hello_reply, encode(r), {}};
  }
  Reply bad_request(const std::string& why) override {
    ResultMsg m;
    m.status = ReplyStatus::bad_request;
    m.message = why;
    return {MsgType::result, encode(m), {}};
  }
  ResultMsg last_result() const {
    REQUIRE(!sent.empty());
    REQUIRE(sent.back().reply.type == MsgType::result);
    auto r = decode_result(sent.back().reply.header);
    REQUIRE(r.ok());
    return *r;
  }
};

SigningKey new_key() {
  auto k = SigningKey::generate();
  REQUIRE(k.ok());
  return std::move(*k);
}

struct Node {
  SigningKey node_key = new_key(), client_key = new_key(), stranger = new_key();
  AuthGate gate;
  Connections eps;
  FakeServer server;
  Intake intake;

  static std::optional<auth::AuthorizedKeys> clients(const SigningKey& k) {
    auth::AuthorizedKeys keys;
    keys.add({k.public_key(), auth::kAllClientVerbs, "alice"});
    return keys;
  }
  // largest: the largest request or reply the node accepts.
  explicit Node(uint64_t largest = 1 << 20)
      : gate(std::make_shared<keys::HeldKey>(std::move(node_key)), clients(client_key)),
        intake(eps, gate, server, [this](std::string_view l) { server.lines.emplace_back(l); }, largest, largest) {}

  // A message through Intake as the server's receive path gives it: whether it goes on.
  bool deliver(Ep to, MsgType type, const Bytes& header, ByteView* body = nullptr) {
    ByteView hv(header);
    const bool on = intake.screen(type, to, eps.find(to), &hv);
    if (body) *body = hv;
    return on;
  }

  // A connection that says hello and proves key; returns its session token (zero if refused).
  // proven: the key the connection's transport proved (TLS), if any.
  SessionToken connect(Ep to, const SigningKey& key, const SigningKey* proven = nullptr) {
    Client& c = eps.add(to, "10.0.0.9:" + std::to_string(reinterpret_cast<uintptr_t>(to.key())), std::chrono::steady_clock::now());
    if (proven) c.session.proven = proven->public_key().raw;
    Hello h;
    auto n = auth::random_nonce();
    REQUIRE(n.ok());
    h.nonce = *n;
    CHECK_FALSE(deliver(to, MsgType::hello, encode(h)));
    REQUIRE(server.sent.back().reply.type == MsgType::hello_reply);
    auto hr = decode_hello_reply(server.sent.back().reply.header);
    REQUIRE(hr.ok());
    Auth a;
    a.request_id = 1;
    a.client_key = key.public_key().raw;
    auto sig = key.sign(auth::client_proof(h.nonce, hr->nonce, hr->node_key, key.public_key().raw));
    REQUIRE(sig.ok());
    a.signature = *sig;
    CHECK_FALSE(deliver(to, MsgType::auth, encode(a)));
    auto ar = decode_auth_reply(server.sent.back().reply.header);
    REQUIRE(ar.ok());
    return ar->token;
  }

  static Bytes invoke(uint64_t id, const SessionToken& token) {
    Invoke inv;
    inv.request_id = id;
    inv.entry = "burn";
    Bytes h = encode(inv);
    h.insert(h.end(), token.begin(), token.end());
    return h;
  }
};

}  // namespace

TEST_CASE("nothing but hello and auth goes on before a key is proved", "[intake]") {
  Node n;
  n.eps.add(ep(1), "10.0.0.9:1", std::chrono::steady_clock::now());
  CHECK_FALSE(n.deliver(ep(1), MsgType::invoke, Node::invoke(7, {})));
  CHECK(n.server.last_result().status == ReplyStatus::unauthenticated);
  CHECK(n.server.last_result().request_id == 7);
  // A key not among the clients is refused, and its connection is closed at the next sweep.
  const SessionToken none = n.connect(ep(2), n.stranger);
  CHECK(none == SessionToken{});
  CHECK(n.eps.find(ep(2))->doomed);
  CHECK_FALSE(n.deliver(ep(2), MsgType::invoke, Node::invoke(8, none)));
  CHECK(n.server.lines.back().find("refused client from 10.0.0.9:2") != std::string::npos);
}

TEST_CASE("requests on an endpoint that is no connection are refused, and logged once a second", "[intake]") {
  Node n;  // a peer that made its endpoint from a worker address it forged, say
  for (uint64_t i = 0; i < 5000; ++i) CHECK_FALSE(n.deliver(ep(99), MsgType::list, Node::invoke(i, {})));
  CHECK(n.server.sent.size() == 5000);  // each answered unauthenticated
  CHECK(n.server.last_result().status == ReplyStatus::unauthenticated);
  CHECK(n.server.lines.size() <= 2);  // the first, and at most one more if a second went by
  REQUIRE_FALSE(n.server.lines.empty());
  CHECK(n.server.lines[0].find("from a peer that is no connection") != std::string::npos);
}

TEST_CASE("over TLS, a connection authenticates only as the key its handshake proved", "[intake]") {
  Node n;
  CHECK(n.connect(ep(1), n.client_key, &n.stranger) == SessionToken{});
  CHECK(n.server.lines.back().find("not the key this connection's TLS handshake proved") != std::string::npos);
  CHECK(n.eps.find(ep(1))->doomed);
  CHECK(n.connect(ep(2), n.client_key, &n.client_key) != SessionToken{});
  // Who may complete a handshake at all: an authorized client's key; a node's only with the
  // verb forward.
  std::string why;
  CHECK(n.gate.admits(n.client_key.public_key().raw, false, &why));
  CHECK_FALSE(n.gate.admits(n.stranger.public_key().raw, false, &why));
  CHECK(why.find("not among the node's authorized keys") != std::string::npos);
  CHECK_FALSE(n.gate.admits(n.client_key.public_key().raw, true, &why));
  CHECK(why.find("may not forward") != std::string::npos);
}

TEST_CASE("an authenticated connection's requests carry its token, or are dropped unanswered", "[intake]") {
  Node n;
  const SessionToken token = n.connect(ep(1), n.client_key);
  REQUIRE(token != SessionToken{});
  ByteView body;
  const Bytes sealed = Node::invoke(7, token);
  CHECK(n.deliver(ep(1), MsgType::invoke, sealed, &body));
  CHECK(body.size() == sealed.size() - kTokenSize);
  const size_t replies = n.server.sent.size();
  SessionToken wrong = token;
  wrong[0] ^= 1;
  CHECK_FALSE(n.deliver(ep(1), MsgType::invoke, Node::invoke(8, wrong)));
  CHECK(n.server.sent.size() == replies);  // nothing sent to the connection it claims
  CHECK(n.server.lines.back().find("without its session token") != std::string::npos);
}

TEST_CASE("requests waiting past 128 on a connection or 512 on a key are answered limit", "[intake]") {
  Node n;
  // Six connections of one key, 120 requests each, none of which ends: exactly 512 are taken.
  std::vector<SessionToken> tokens;
  for (uintptr_t c = 1; c <= 6; ++c) tokens.push_back(n.connect(ep(c), n.client_key));
  std::vector<std::optional<Charge>> waiting(6 * 120);
  size_t taken = 0, refused = 0;
  for (uint64_t i = 0; i < 120; ++i)
    for (uintptr_t c = 1; c <= 6; ++c) {
      const Bytes h = Node::invoke(100 + i, tokens[c - 1]);
      ByteView body;
      REQUIRE(n.deliver(ep(c), MsgType::invoke, h, &body));
      if (n.intake.admit(MsgType::invoke, ep(c), n.eps.find(ep(c)), body, 8, &waiting[taken + refused])) {
        ++taken;
        continue;
      }
      ++refused;
      const ResultMsg r = n.server.last_result();
      CHECK(r.status == ReplyStatus::limit);
      CHECK(r.request_id == 100 + i);
      CHECK(r.message == "this key has 512 requests in flight, the node's limit; wait for replies before sending more");
    }
  CHECK(taken == 512);
  CHECK(refused == 208);
  CHECK(n.eps.find(ep(1))->key_usage->requests == 512);
  // Logged once, then at most once a second.
  CHECK(std::count_if(n.server.lines.begin(), n.server.lines.end(),
                      [](const std::string& l) { return l.find("this key has 512 requests in flight") != std::string::npos; }) == 1);

  // A request that ends gives its share back: the next one is taken.
  for (auto& w : waiting)
    if (w) {
      w.reset();
      break;
    }
  std::optional<Charge> next;
  ByteView body;
  const Bytes h = Node::invoke(900, tokens[5]);
  REQUIRE(n.deliver(ep(6), MsgType::invoke, h, &body));
  CHECK(n.intake.admit(MsgType::invoke, ep(6), n.eps.find(ep(6)), body, 8, &next));

  // One connection alone stops at 128.
  Node one;
  const SessionToken t = one.connect(ep(1), one.client_key);
  std::vector<std::optional<Charge>> held(200);
  size_t ok = 0;
  for (uint64_t i = 0; i < 200; ++i) {
    ByteView b;
    const Bytes h = Node::invoke(i, t);  // b views it
    REQUIRE(one.deliver(ep(1), MsgType::invoke, h, &b));
    ok += one.intake.admit(MsgType::invoke, ep(1), one.eps.find(ep(1)), b, 8, &held[i]);
  }
  CHECK(ok == 128);
  CHECK(one.server.last_result().message ==
        "this connection has 128 requests in flight, the node's limit; wait for replies before sending more");
}

TEST_CASE("forwards from peers and data past the node's limit take no bytes in flight", "[intake]") {
  Node n(1000);
  const SessionToken token = n.connect(ep(1), n.client_key);
  Client* c = n.eps.find(ep(1));
  std::optional<Charge> fwd, big, small, mid;
  CHECK(n.intake.admit(MsgType::forward, ep(1), c, {}, 500, &fwd));
  CHECK_FALSE(fwd);
  CHECK(n.intake.admit(MsgType::invoke, ep(1), c, Node::invoke(1, token), 5000, &big));  // over 1000: never fetched
  CHECK(c->usage->bytes == 0);
  CHECK(n.intake.admit(MsgType::invoke, ep(1), c, Node::invoke(2, token), 600, &small));
  CHECK(n.intake.admit(MsgType::invoke, ep(1), c, Node::invoke(3, token), 1000, &mid));
  CHECK(c->usage->bytes == 1600);
  // Twice the largest on a connection.
  std::optional<Charge> more;
  CHECK_FALSE(n.intake.admit(MsgType::invoke, ep(1), c, Node::invoke(4, token), 500, &more));
  CHECK(n.server.last_result().status == ReplyStatus::limit);
  CHECK(n.server.last_result().message.find("this connection has 1600 bytes of requests") == 0);
  CHECK(c->usage->requests == 3);
}

TEST_CASE("one key holds at most 1024 authenticated connections, from any hosts", "[intake]") {
  Node n;
  for (uintptr_t i = 1; i <= kMaxConnectionsPerKey; ++i) REQUIRE(n.connect(ep(i), n.client_key) != SessionToken{});
  CHECK(n.connect(ep(kMaxConnectionsPerKey + 1), n.client_key) == SessionToken{});
  CHECK(n.server.lines.back().find("this key has 1024 connections open, the node's limit per key") != std::string::npos);
  CHECK(n.eps.find(ep(kMaxConnectionsPerKey + 1))->doomed);
  CHECK_FALSE(n.eps.find(ep(kMaxConnectionsPerKey + 1))->session.authenticated);
  // One of them closes: the key may connect again.
  n.eps.erase(ep(1));
  CHECK(n.connect(ep(kMaxConnectionsPerKey + 2), n.client_key) != SessionToken{});
}
