// Peers: a forward waits until this node has checked the peer's node key and proved its own;
// a peer that cannot prove its key, refuses this node, goes away or stays silent fails what
// waited for it, and the next forward connects again.
#include <catch2/catch.hpp>

#include "peers.h"
#include "support.h"
#include "xcargo/auth.h"

using namespace xcargo;
using namespace xcargo::loader;
using namespace xcargo::wire;
using namespace std::chrono_literals;

namespace {

ucp_ep* ep(uintptr_t n) { return reinterpret_cast<ucp_ep*>(n); }

// Records what Peers asks of the transport.
struct FakeLink : PeerLink {
  struct Sent {
    ucp_ep* ep;
    Reply r;
    Failed on_fail;
  };
  std::vector<Sent> sent;
  std::vector<ucp_ep*> closed;
  uintptr_t next = 1;
  bool reachable = true;
  ucp_ep* connect(const std::string&, std::string* why) override {
    if (!reachable) return *why = "connection refused", nullptr;
    return ep(next++);
  }
  void send(ucp_ep* e, Reply&& r, Failed on_fail) override { sent.push_back({e, std::move(r), std::move(on_fail)}); }
  void close(ucp_ep* e) override { closed.push_back(e); }
};

struct Fixture {
  Cluster cluster{{{0, "127.0.0.1:7000"}, {1, "127.0.0.1:7001"}}};
  SigningKey mine = test::fresh_key(), theirs = test::fresh_key();
  FakeLink link;
  std::vector<std::string> logged;
  Peers peers{cluster, mine, link, [this](std::string_view l) { logged.emplace_back(l); }};
  std::vector<std::string> failures;

  PeerLink::Failed record() {
    return [this](const std::string& why) { failures.push_back(why); };
  }
  // Node 1's answer to the hello this node sent it, signed by `signer`.
  HelloReply hello_reply(const Hello& h, const SigningKey& signer) {
    HelloReply r;
    r.node_id = 1;
    r.nonce = *auth::random_nonce();
    r.node_key = theirs.public_key().raw;
    auto sig = signer.sign(auth::node_proof(h.nonce, r.nonce, r.node_key));
    REQUIRE(sig.ok());
    r.node_sig = *sig;
    return r;
  }
};

Hello decoded_hello(const Reply& r) {
  REQUIRE(r.type == MsgType::hello);
  auto h = decode_hello(r.header);
  REQUIRE(h.ok());
  return *h;
}

Reply forward_message() { return {MsgType::forward, Bytes{1, 2, 3}, Bytes{9}}; }

}  // namespace

TEST_CASE("forwards wait for the handshake, then carry the session token", "[peers]") {
  Fixture x;
  std::string why;
  Peer* p = x.peers.get(1, &why);
  REQUIRE(p);
  REQUIRE(x.link.sent.size() == 1);
  const Hello h = decoded_hello(x.link.sent[0].r);
  CHECK(h.nonce == p->nonce);
  x.peers.send(*p, forward_message(), x.record());
  CHECK(x.link.sent.size() == 1);  // waits: nothing is sent before this node has authenticated

  const HelloReply hr = x.hello_reply(h, x.theirs);
  x.peers.on_hello_reply(hr);
  REQUIRE(x.link.sent.size() == 2);
  REQUIRE(x.link.sent[1].r.type == MsgType::auth);
  auto a = decode_auth(x.link.sent[1].r.header);
  REQUIRE(a.ok());
  CHECK(a->request_id == 1);  // the node id: how auth_reply finds its peer
  CHECK(a->client_key == x.mine.public_key().raw);
  PublicKey me;
  me.raw = a->client_key;
  CHECK(ed25519_verify(me, auth::client_proof(h.nonce, hr.nonce, hr.node_key, a->client_key), a->signature));

  AuthReply ar;
  ar.request_id = 1;
  ar.verbs = auth::kForward;
  ar.token.fill(0xab);
  x.peers.on_auth_reply(ar);
  REQUIRE(x.link.sent.size() == 3);
  const Reply& f = x.link.sent[2].r;
  CHECK(f.type == MsgType::forward);
  CHECK(f.header == Bytes{1, 2, 3, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab});
  CHECK(f.data == Bytes{9});
  x.peers.send(*x.peers.get(1, &why), forward_message(), x.record());  // now at once, on the same connection
  CHECK(x.link.sent.size() == 4);
  CHECK(x.link.sent[3].ep == x.link.sent[0].ep);
  CHECK(x.failures.empty());
  x.peers.on_auth_reply(ar);  // a repeated answer changes nothing
  CHECK(x.link.sent.size() == 4);
}

TEST_CASE("a peer that cannot prove its node key gets nothing", "[peers]") {
  Fixture x;
  std::string why;
  Peer* p = x.peers.get(1, &why);
  x.peers.send(*p, forward_message(), x.record());
  const SigningKey impostor = test::fresh_key();
  x.peers.on_hello_reply(x.hello_reply(decoded_hello(x.link.sent[0].r), impostor));  // signed by another key
  CHECK(x.link.sent.size() == 1);  // no proof, no forward
  CHECK(x.failures == std::vector<std::string>{"it did not prove its node key"});
  CHECK(x.link.closed.size() == 1);
  CHECK(x.peers.all().empty());
  REQUIRE(x.peers.get(1, &why));  // the next forward connects again
  CHECK(x.link.sent.size() == 2);
  CHECK(x.link.sent[1].ep != x.link.sent[0].ep);
}

TEST_CASE("a peer that refuses this node's key, or lacks the forward verb, fails what waited", "[peers]") {
  for (const bool refused : {true, false}) {
    Fixture x;
    std::string why;
    Peer* p = x.peers.get(1, &why);
    x.peers.send(*p, forward_message(), x.record());
    x.peers.on_hello_reply(x.hello_reply(decoded_hello(x.link.sent[0].r), x.theirs));
    AuthReply ar;
    ar.request_id = 1;
    if (refused) ar.status = ReplyStatus::unauthenticated, ar.message = "key not authorized";
    else ar.verbs = auth::kRun;
    x.peers.on_auth_reply(ar);
    CHECK(x.link.sent.size() == 2);  // hello and auth only
    CHECK(x.failures == std::vector<std::string>{"it does not accept forwards from this node's key"});
    REQUIRE(x.logged.size() == 1);
    CHECK_THAT(x.logged[0], Catch::Contains(refused ? "key not authorized" : "the key may run"));
  }
}

TEST_CASE("a silent peer is dropped after the deadline; a lost one at once", "[peers]") {
  Fixture x;
  std::string why;
  Peer* p = x.peers.get(1, &why);
  x.peers.send(*p, forward_message(), x.record());
  const auto since = p->since;
  x.peers.sweep(since + 5s, 10000ms);
  CHECK(x.failures.empty());
  x.peers.sweep(since + 11s, 10000ms);
  CHECK(x.failures == std::vector<std::string>{"it did not complete authentication in time"});
  CHECK(x.link.closed.size() == 1);

  p = x.peers.get(1, &why);
  x.peers.send(*p, forward_message(), x.record());
  CHECK_FALSE(x.peers.lost(ep(999)));
  CHECK(x.peers.lost(p->ep));
  CHECK(x.failures.back() == "the connection to it was lost");
  CHECK(x.link.closed.size() == 1);  // UCX's error callback closes a lost endpoint
}

TEST_CASE("nodes outside the cluster or out of reach are not forwarded to", "[peers]") {
  Fixture x;
  std::string why;
  CHECK_FALSE(x.peers.get(7, &why));
  CHECK(why == "it is not in the cluster");
  x.link.reachable = false;
  CHECK_FALSE(x.peers.get(1, &why));
  CHECK(why == "it could not be reached");
  REQUIRE(x.logged.size() == 1);
  CHECK_THAT(x.logged[0], Catch::Contains("connection refused"));
}

TEST_CASE("a failed send forgets the connection it was on, not a newer one", "[peers]") {
  Fixture x;
  std::string why;
  ucp_ep* first = x.peers.get(1, &why)->ep;
  CHECK(x.peers.forget(1, first));
  ucp_ep* second = x.peers.get(1, &why)->ep;
  CHECK_FALSE(x.peers.forget(1, first));  // a late failure of the old connection
  CHECK(x.peers.all().at(1).ep == second);
}
