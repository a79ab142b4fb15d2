// Peers: a forward waits until this node has checked the peer's node key and proved its own;
// a peer that cannot prove its key, refuses this node, goes away or stays silent fails what
// waited for it, and the next forward connects again.
#include <catch2/catch.hpp>

#include <algorithm>

#include "server/lane.h"
#include "server/peers.h"
#include "support.h"
#include "auth/auth.h"

using namespace xcargo;
using namespace xcargo::loader;
using namespace xcargo::wire;
using namespace std::chrono_literals;

namespace {

Ep ep(uintptr_t n) { return reinterpret_cast<ucp_ep*>(n); }

// Records what Peers asks of the transport.
struct FakeLink : PeerLink {
  struct Sent {
    Ep ep;
    Reply r;
    Failed on_fail;
  };
  std::vector<Sent> sent;
  std::vector<Ep> closed;
  uintptr_t next = 1;
  bool reachable = true;
  uint64_t dials = 0;  // nonzero: every address is dialed, numbered from here
  uint64_t dial(const std::string&) override { return dials ? dials++ : 0; }
  Ep connect(const std::string&, std::string* why) override {
    if (!reachable) return *why = "connection refused", nullptr;
    return ep(next++);
  }
  void send(Ep e, Reply&& r, Failed on_fail) override { sent.push_back({e, std::move(r), std::move(on_fail)}); }
  void close(Ep e) override { closed.push_back(e); }
};

struct Fixture {
  Cluster cluster{{{0, "127.0.0.1:7000"}, {1, "127.0.0.1:7001"}}};
  SigningKey mine = test::fresh_key(), theirs = test::fresh_key();
  keys::HeldKey my_key{mine};
  FakeLink link;
  std::vector<std::string> logged;
  bool lanes = false;  // whether peers are on this host (asked for a lane)
  Peers peers{cluster, my_key, link, [this](std::string_view l) { logged.emplace_back(l); },
              [this](const std::string&) { return lanes; },
              [this](const RawKey& k) { return k == theirs.public_key().raw; }};  // the cluster's node key
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
  CHECK(a->request_id == p->auth_id);  // random: how auth_reply finds its peer
  CHECK(a->client_key == x.mine.public_key().raw);
  PublicKey me;
  me.raw = a->client_key;
  CHECK(ed25519_verify(me, auth::client_proof(h.nonce, hr.nonce, hr.node_key, a->client_key), a->signature));

  AuthReply ar;
  ar.request_id = 1;  // the node id, as a forger would guess: ignored
  ar.verbs = auth::kForward;
  ar.token.fill(0xcd);
  x.peers.on_auth_reply(ar);
  CHECK(x.link.sent.size() == 2);
  ar.request_id = p->auth_id;
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

TEST_CASE("a peer reached through its door is greeted once dialed; a failed dial fails what waited", "[peers]") {
  Fixture x;
  x.link.dials = 100;
  std::string why;
  Peer* p = x.peers.get(1, &why);
  REQUIRE(p);
  CHECK(p->state == Peer::dialing);
  x.peers.send(*p, forward_message(), x.record());
  CHECK(x.link.sent.empty());  // no connection yet: nothing sent
  CHECK_FALSE(x.peers.dialed(7, ep(55)));  // another dial's: the caller closes it
  CHECK_FALSE(x.peers.lost(Ep()));         // a dialing peer has no connection to lose
  REQUIRE(x.peers.dialed(100, ep(55)));
  REQUIRE(x.link.sent.size() == 1);
  CHECK(x.link.sent[0].ep == ep(55));
  const Hello h = decoded_hello(x.link.sent[0].r);
  CHECK(h.nonce == p->nonce);
  CHECK_FALSE(x.peers.dialed(100, ep(56)));  // once
  CHECK(x.failures.empty());

  Peer* q = x.peers.get(0, &why);
  REQUIRE(q);
  x.peers.send(*q, forward_message(), x.record());
  x.peers.dial_failed(101, "no loader listens there on this host");
  CHECK(x.failures == std::vector<std::string>{"it could not be reached"});
  CHECK(x.link.closed.empty());  // it had no connection
  CHECK(x.peers.all().size() == 1);
  REQUIRE(!x.logged.empty());
  CHECK(x.logged.back() == "cannot reach node 0: no loader listens there on this host");

  Peer* r = x.peers.get(0, &why);  // dialed again, and never answered
  REQUIRE(r);
  x.peers.sweep(r->since + 11s, 10000ms);  // node 1 never authenticated either
  CHECK(x.peers.all().empty());
  CHECK(x.link.closed == std::vector<Ep>{ep(55)});  // node 1's connection; node 0 had none
  CHECK(std::count(x.logged.begin(), x.logged.end(), "node 0 was not reached in time; not forwarding to it") == 1);
}

TEST_CASE("a peer that cannot prove its node key gets nothing", "[peers]") {
  Fixture x;
  std::string why;
  Peer* p = x.peers.get(1, &why);
  x.peers.send(*p, forward_message(), x.record());
  const SigningKey impostor = test::fresh_key();
  x.peers.on_hello_reply(x.hello_reply(decoded_hello(x.link.sent[0].r), impostor));  // signed by another key
  x.peers.on_hello_reply(x.hello_reply(decoded_hello(x.link.sent[0].r), impostor));
  CHECK(x.link.sent.size() == 1);  // no proof, no forward
  CHECK(x.logged.size() == 1);     // once
  // Anyone could have sent that answer: the peer is dropped only if no valid one comes in time.
  CHECK(x.failures.empty());
  x.peers.sweep(p->since + 11s, 10000ms);
  CHECK(x.failures == std::vector<std::string>{"it did not complete authentication in time"});
  CHECK(x.link.closed.size() == 1);
  CHECK(x.peers.all().empty());
  REQUIRE(x.peers.get(1, &why));  // the next forward connects again
  CHECK(x.link.sent.size() == 2);
  CHECK(x.link.sent[1].ep != x.link.sent[0].ep);
}

TEST_CASE("a peer that proves a node key that is not the cluster's gets nothing", "[peers]") {
  // Whoever listens at a node's address (its port taken while the node's loader is down, say)
  // can sign with a key of its own; it must not get this node's forwards.
  Fixture x;
  std::string why;
  Peer* p = x.peers.get(1, &why);
  x.peers.send(*p, forward_message(), x.record());
  const SigningKey impostor = test::fresh_key();
  const Hello h = decoded_hello(x.link.sent[0].r);
  HelloReply r;
  r.node_id = 1;
  r.nonce = *auth::random_nonce();
  r.node_key = impostor.public_key().raw;
  r.node_sig = *impostor.sign(auth::node_proof(h.nonce, r.nonce, r.node_key));
  CHECK(x.peers.on_hello_reply(r));
  CHECK(x.link.sent.size() == 1);  // no auth, no forward
  CHECK(x.failures == std::vector<std::string>{"its node key is not one of the cluster's"});
  REQUIRE(x.logged.size() == 1);
  CHECK_THAT(x.logged[0], Catch::Contains("not forwarding to it"));
  CHECK(x.link.closed.size() == 1);
  CHECK(x.peers.all().empty());
}

TEST_CASE("a peer that refuses this node's key, or lacks the forward verb, fails what waited", "[peers]") {
  for (const bool refused : {true, false}) {
    Fixture x;
    std::string why;
    Peer* p = x.peers.get(1, &why);
    x.peers.send(*p, forward_message(), x.record());
    x.peers.on_hello_reply(x.hello_reply(decoded_hello(x.link.sent[0].r), x.theirs));
    AuthReply ar;
    ar.request_id = p->auth_id;
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
  Ep first = x.peers.get(1, &why)->ep;
  CHECK(x.peers.forget(1, first));
  Ep second = x.peers.get(1, &why)->ep;
  CHECK_FALSE(x.peers.forget(1, first));  // a late failure of the old connection
  CHECK(x.peers.all().at(1).ep == second);
}

namespace {

// Completes node 1's handshake (its token: 16 bytes of 0xab).
Peer& handshake(Fixture& x) {
  std::string why;
  Peer* first = x.peers.get(1, &why);
  REQUIRE(first);
  x.peers.on_hello_reply(x.hello_reply(decoded_hello(x.link.sent.back().r), x.theirs));
  AuthReply ar;
  ar.request_id = first->auth_id;
  ar.verbs = auth::kForward;
  ar.token.fill(0xab);
  x.peers.on_auth_reply(ar);
  Peer* p = x.peers.get(1, &why);
  REQUIRE(p);
  REQUIRE(p->state == Peer::ready);
  return *p;
}

bool ends_with_token(ByteView header) {
  return header.size() >= 16 && std::all_of(header.end() - 16, header.end(), [](uint8_t b) { return b == 0xab; });
}

LaneOffer offer_of(const Lane& l, const Peer& p) {
  LaneOffer o;
  o.request_id = p.lane_id;
  o.shm_id = l.shm_id();
  o.nonce = l.nonce();
  return o;
}

}  // namespace

TEST_CASE("a peer on this host is asked for a lane, which then carries the forwards it may", "[peers][lane]") {
  Fixture x;
  x.lanes = true;
  Peer& p = handshake(x);
  const Reply& ask = x.link.sent.back().r;
  REQUIRE(ask.type == MsgType::lane);
  CHECK(leading_request_id(MsgType::lane, ask.header) == p.lane_id);  // random: how lane_reply finds its peer
  CHECK(ends_with_token(ask.header));
  CHECK(p.lane_state == Peer::lane_asked);

  auto l = Lane::create(nullptr, 1);
  REQUIRE(l.ok());
  Lane& theirs = **l;
  x.peers.on_lane_offer(offer_of(theirs, p));
  REQUIRE(p.lane_state == Peer::lane_open);
  x.peers.on_lane_offer(offer_of(theirs, p));  // a repeated answer changes nothing
  CHECK(p.lane_state == Peer::lane_open);

  const size_t through_ucx = x.link.sent.size();
  x.peers.send(p, forward_message(), x.record(), true);
  CHECK(x.link.sent.size() == through_ucx);  // not through UCX, and no kick: the peer polls
  MsgType type;
  ByteView h, d;
  std::string why;
  REQUIRE(theirs.next(&type, &h, &d, &why) == lane::Ring::Got::frame);
  CHECK(type == MsgType::forward);
  CHECK(Bytes(h.begin(), h.begin() + 3) == Bytes{1, 2, 3});
  CHECK(ends_with_token(h));
  CHECK(Bytes(d.begin(), d.end()) == Bytes{9});

  x.peers.send(p, forward_message(), x.record(), false);  // a cargo it may not hold yet: UCX
  REQUIRE(x.link.sent.size() == through_ucx + 1);
  CHECK(x.link.sent.back().r.type == MsgType::forward);

  theirs.set_idle(true);  // its worker may sleep: the lane's message is followed by a kick
  x.peers.send(p, forward_message(), x.record(), true);
  REQUIRE(x.link.sent.size() == through_ucx + 2);
  CHECK(x.link.sent.back().r.type == MsgType::kick);
  CHECK(x.link.sent.back().r.header == Bytes(16, 0xab));

  // The peer goes away: the forward it did not take fails, the one it took does not.
  CHECK(x.peers.lost(x.link.sent[0].ep));
  CHECK(x.failures == std::vector<std::string>{"the connection to it was lost"});
}

TEST_CASE("a lane that is not the peer's, or that its worker left, carries nothing", "[peers][lane]") {
  Fixture x;
  x.lanes = true;
  auto l = Lane::create(nullptr, 1);
  REQUIRE(l.ok());
  SECTION("an offer whose nonce is not the segment's") {
    Peer& p = handshake(x);
    LaneOffer o = offer_of(**l, p);
    o.nonce[0] ^= 1;
    x.peers.on_lane_offer(o);
    CHECK(p.lane_state == Peer::no_lane);
    CHECK_FALSE(x.logged.empty());
    const size_t n = x.link.sent.size();
    x.peers.send(p, forward_message(), x.record(), true);
    REQUIRE(x.link.sent.size() == n + 1);  // through UCX
    CHECK(x.link.sent.back().r.type == MsgType::forward);
  }
  SECTION("an offer without the lane request's random id (a forger's, naming the node id)") {
    Peer& p = handshake(x);
    auto forger = Lane::create(nullptr, 2);  // a lane this uid made, as for any client
    REQUIRE(forger.ok());
    LaneOffer forged = offer_of(**forger, p);
    forged.request_id = 1;
    x.peers.on_lane_offer(forged);
    CHECK(p.lane_state == Peer::lane_asked);
    x.peers.on_lane_offer(offer_of(**l, p));
    REQUIRE(p.lane_state == Peer::lane_open);
    x.peers.send(p, forward_message(), x.record(), true);
    MsgType type;
    ByteView h, d;
    std::string why;
    CHECK((*l)->next(&type, &h, &d, &why) == lane::Ring::Got::frame);
    CHECK((*forger)->next(&type, &h, &d, &why) == lane::Ring::Got::nothing);
  }
  SECTION("no lane is asked of a peer elsewhere") {
    x.lanes = false;
    Peer& p = handshake(x);
    CHECK(x.link.sent.back().r.type == MsgType::auth);
    CHECK(p.lane_state == Peer::no_lane);
  }
  SECTION("a worker that left its lane with forwards in it is dropped at the sweep; one still there is not") {
    Peer& p = handshake(x);
    x.peers.on_lane_offer(offer_of(**l, p));
    x.peers.send(p, forward_message(), x.record(), true);
    x.peers.sweep(std::chrono::steady_clock::now(), 10s);
    REQUIRE(x.peers.all().count(1) == 1);  // still attached
    CHECK(x.failures.empty());
    l->reset();  // its worker ends
    x.peers.sweep(std::chrono::steady_clock::now(), 10s);
    CHECK(x.peers.all().count(1) == 0);
    CHECK(x.failures == std::vector<std::string>{"it went away"});
  }
}
