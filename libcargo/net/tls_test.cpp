// TLS channels between Ed25519 identities: who is accepted, what a peer learns of the other,
// frames and their limits, and what an attacker on the wire can do (nothing: a changed byte
// ends the connection, a replayed recording does not get past the handshake).
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <thread>

#include "net/tls.h"

using namespace xcargo;
using namespace xcargo::tls;
using Io = Channel::Io;

namespace {

SigningKey new_key() {
  auto k = SigningKey::generate();
  REQUIRE(k.ok());
  return std::move(*k);
}

// A node's credential as its worker holds it: an ephemeral key certified by the node key.
Credential certified_by(const SigningKey& node) {
  SigningKey ephemeral = new_key();
  auto leaf = certificate(node, ephemeral.public_key().raw, std::chrono::hours(24));
  auto root = certificate(node, node.public_key().raw, std::chrono::hours(24));
  REQUIRE(leaf.ok());
  REQUIRE(root.ok());
  return Credential{std::move(ephemeral), {std::move(*leaf), std::move(*root)}};
}

Accept only(const SigningKey& k, bool certified) {
  const RawKey want = k.public_key().raw;
  return [want, certified](const Peer& p, std::string* why) {
    if (p.identity == want && p.certified == certified) return true;
    *why = "not the key expected";
    return false;
  };
}

std::shared_ptr<Context> context(Context::Role role, const Credential& own, Accept accept) {
  auto c = Context::create(role, own, std::move(accept));
  REQUIRE(c.ok());
  return *c;
}

struct Pair {
  int a = -1, b = -1;
  explicit Pair(bool nonblocking = false) {
    int fds[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0);
    a = fds[0], b = fds[1];
    if (nonblocking)
      for (int fd : fds) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  }
};

// Drives both handshakes on non-blocking sockets in one thread, relaying each end's bytes to
// the other through `wire` (which may change or record them). Returns each end's outcome.
struct Relay {
  Pair client_side{true}, server_side{true};  // client <-> relay a/b, relay <-> server
  std::function<void(Bytes&, bool to_server)> wire = [](Bytes&, bool) {};
  // Moves what one side wrote to the other; whether anything moved.
  bool pump() {
    bool moved = false;
    uint8_t buf[65536];
    for (int dir = 0; dir < 2; ++dir) {
      const int from = dir == 0 ? client_side.b : server_side.a, to = dir == 0 ? server_side.a : client_side.b;
      const ssize_t n = ::read(from, buf, sizeof buf);
      if (n <= 0) continue;
      Bytes b(buf, buf + n);
      wire(b, dir == 0);
      for (size_t off = 0; off < b.size();) {
        const ssize_t w = ::write(to, b.data() + off, b.size() - off);
        if (w > 0) off += size_t(w);
      }
      moved = true;
    }
    return moved;
  }
};

// Runs both handshakes through relay r to their ends (or errors).
void handshake(Relay& r, Channel& c, Channel& s, Result<Io>* cr, Result<Io>* sr) {
  *cr = Io::want_read, *sr = Io::want_read;
  for (int i = 0; i < 10000; ++i) {
    if (cr->ok() && *(*cr) != Io::done) *cr = c.handshake();
    if (sr->ok() && *(*sr) != Io::done) *sr = s.handshake();
    const bool moved = r.pump();
    if ((!cr->ok() || *(*cr) == Io::done) && (!sr->ok() || *(*sr) == Io::done) && !moved) return;
  }
}

// Receives one frame on a non-blocking channel, pumping the relay meanwhile.
Result<Io> receive(Relay& r, Channel& ch, wire::Frame& f, uint64_t max = 1 << 20) {
  for (int i = 0; i < 100000; ++i) {
    auto io = ch.receive(f, max);
    if (!io.ok() || *io != Io::want_read) return io;
    r.pump();
  }
  return Io::want_read;
}

// A client and a node talking through a relay, their handshakes run: cr and sr, how each
// ended.
struct Conversation {
  Relay relay;
  std::unique_ptr<Channel> client, server;
  Result<Io> cr = Io::done, sr = Io::done;
  Conversation(const Credential& node, Accept node_accepts, const Credential& client_cred, Accept client_accepts,
               std::function<void(Bytes&, bool)> wire = {}) {
    if (wire) relay.wire = std::move(wire);
    auto s = Channel::start(context(Context::server, node, std::move(node_accepts)), relay.server_side.b);
    auto c = Channel::start(context(Context::client, client_cred, std::move(client_accepts)), relay.client_side.a);
    REQUIRE(s.ok());
    REQUIRE(c.ok());
    server = std::move(*s);
    client = std::move(*c);
    handshake(relay, *client, *server, &cr, &sr);
  }
};

}  // namespace

TEST_CASE("client and node prove their keys; each learns the other's identity", "[tls]") {
  const SigningKey node = new_key(), client = new_key();
  auto cred = Credential::self_signed(client);
  REQUIRE(cred.ok());
  auto server_ctx = context(Context::server, certified_by(node), only(client, false));
  auto client_ctx = context(Context::client, *cred, only(node, true));
  Pair p;
  std::unique_ptr<Channel> s;
  std::thread t([&] {
    auto ch = Channel::start(server_ctx, p.b);
    REQUIRE(ch.ok());
    s = std::move(*ch);
    auto r = s->handshake();
    REQUIRE(r.ok());
    CHECK(*r == Io::done);
    wire::Frame f;
    auto got = s->receive(f, 8 << 20);
    REQUIRE(got.ok());
    CHECK(f.type == wire::MsgType::push);
    CHECK(f.data.size() == (4u << 20));
    CHECK(f.data[12345] == uint8_t(12345 % 251));
    REQUIRE(s->send(wire::MsgType::push_reply, Bytes{1, 2, 3}, {}).ok());
  });
  auto c = Channel::start(client_ctx, p.a);
  REQUIRE(c.ok());
  auto r = (*c)->handshake();
  REQUIRE(r.ok());
  CHECK(*r == Io::done);
  CHECK((*c)->peer().identity == node.public_key().raw);
  CHECK((*c)->peer().certified);
  Bytes big(4u << 20);
  for (size_t i = 0; i < big.size(); ++i) big[i] = uint8_t(i % 251);
  auto sent = (*c)->send(wire::MsgType::push, Bytes{9}, big);
  REQUIRE(sent.ok());
  CHECK(*sent == Io::done);
  wire::Frame f;
  auto got = (*c)->receive(f, 1024);
  REQUIRE(got.ok());
  CHECK(f.type == wire::MsgType::push_reply);
  CHECK(f.header == Bytes{1, 2, 3});
  t.join();
  CHECK(s->peer().identity == client.public_key().raw);
  CHECK_FALSE(s->peer().certified);
}

TEST_CASE("a key the other end does not accept gets no further than the handshake", "[tls]") {
  const SigningKey node = new_key(), client = new_key(), stranger = new_key(), impostor = new_key();
  SECTION("a client key the node does not know") {
    auto cred = Credential::self_signed(stranger);
    REQUIRE(cred.ok());
    Conversation t(certified_by(node), only(client, false), *cred, only(node, true));
    auto& [relay, c, s, cr, sr] = t;
    REQUIRE_FALSE(sr.ok());
    CHECK(sr.error().code() == Errc::unauthenticated);
    CHECK(sr.error().message() == "the other end's key was refused: not the key expected");
    // TLS 1.3: the client's handshake ended first; the node's refusal reaches its first read.
    wire::Frame f;
    auto got = cr.ok() ? receive(relay, *c, f) : Result<Io>(cr.error());
    REQUIRE_FALSE(got.ok());
    CHECK(got.error().code() == Errc::unauthenticated);
  }
  SECTION("a node whose key is not the one the client expects") {
    auto cred = Credential::self_signed(client);
    REQUIRE(cred.ok());
    Conversation t(certified_by(impostor), only(client, false), *cred, only(node, true));
    auto& [relay, c, s, cr, sr] = t;
    REQUIRE_FALSE(cr.ok());
    CHECK(cr.error().code() == Errc::unauthenticated);
    CHECK_FALSE(sr.ok());  // the client's alert
  }
  SECTION("a key certified by another than the issuer it shows") {
    // The impostor's ephemeral key with a leaf it signed itself, beside the node's own root
    // certificate: the chain names the node but the node never signed the leaf.
    SigningKey ephemeral = new_key();
    auto leaf = certificate(impostor, ephemeral.public_key().raw, std::chrono::hours(1));
    auto root = certificate(node, node.public_key().raw, std::chrono::hours(1));
    REQUIRE(leaf.ok());
    REQUIRE(root.ok());
    Credential forged{std::move(ephemeral), {std::move(*leaf), std::move(*root)}};
    auto cred = Credential::self_signed(client);
    REQUIRE(cred.ok());
    Conversation t(forged, only(client, false), *cred, only(node, true));
    auto& [relay, c, s, cr, sr] = t;
    REQUIRE_FALSE(cr.ok());
    CHECK(cr.error().message() == "the other end's key was refused: its certificate is not signed by the key it names as issuer");
  }
  SECTION("a node key shown self-signed where a certified one is expected") {
    auto node_cred = Credential::self_signed(node);
    auto cred = Credential::self_signed(client);
    REQUIRE(node_cred.ok());
    REQUIRE(cred.ok());
    Conversation t(*node_cred, only(client, false), *cred, only(node, true));
    auto& [relay, c, s, cr, sr] = t;
    CHECK_FALSE(cr.ok());
  }
}

TEST_CASE("what travels is sealed: a changed byte ends the connection, a replayed recording is refused", "[tls]") {
  const SigningKey node = new_key(), client = new_key();
  auto cred = Credential::self_signed(client);
  REQUIRE(cred.ok());
  const Credential node_cred = certified_by(node);
  const Bytes secret = {'c', 'r', 'e', 'd', 'i', 't', '-', 'c', 'a', 'r', 'd', '=', '4', '1', '1', '1'};
  Bytes recorded;  // what the client sent, as an observer on the wire saw it
  {
    Conversation t(node_cred, only(client, false), *cred, only(node, true), [&](Bytes& b, bool to_server) {
      if (to_server) recorded.insert(recorded.end(), b.begin(), b.end());
    });
    auto& [relay, c, s, cr, sr] = t;
    REQUIRE(cr.ok());
    REQUIRE(sr.ok());
    REQUIRE(c->send(wire::MsgType::invoke, Bytes{1, 2, 3, 4}, secret).ok());
    wire::Frame f;
    auto got = receive(relay, *s, f);
    REQUIRE(got.ok());
    CHECK(f.data == secret);
  }
  CHECK(std::search(recorded.begin(), recorded.end(), secret.begin(), secret.end()) == recorded.end());

  SECTION("replayed to the node") {
    Pair p(true);
    auto s = Channel::start(context(Context::server, node_cred, only(client, false)), p.b);
    REQUIRE(s.ok());
    REQUIRE(::write(p.a, recorded.data(), recorded.size()) == ssize_t(recorded.size()));
    Result<Io> r = Io::want_read;
    wire::Frame f;
    for (int i = 0; i < 100 && r.ok() && *r != Io::done; ++i) r = (*s)->handshake();
    if (r.ok() && *r == Io::done) r = (*s)->receive(f, 1024);  // never a frame
    CHECK_FALSE((r.ok() && *r == Io::done));
  }
  SECTION("a byte changed on the way") {
    bool flip = false;
    Conversation t(node_cred, only(client, false), *cred, only(node, true), [&](Bytes& b, bool to_server) {
      if (flip && to_server && !b.empty()) b[b.size() / 2] ^= 0x20, flip = false;
    });
    auto& [relay, c, s, cr, sr] = t;
    REQUIRE(cr.ok());
    REQUIRE(sr.ok());
    flip = true;
    REQUIRE(c->send(wire::MsgType::invoke, Bytes{1, 2, 3, 4}, secret).ok());
    wire::Frame f;
    auto got = receive(relay, *s, f);
    REQUIRE_FALSE(got.ok());
    CHECK(got.error().code() == Errc::unreachable);
  }
}

TEST_CASE("frames past the receiver's limits are refused before anything is allocated for them", "[tls]") {
  const SigningKey node = new_key(), client = new_key();
  auto cred = Credential::self_signed(client);
  REQUIRE(cred.ok());
  Conversation t(certified_by(node), only(client, false), *cred, only(node, true));
  auto& [relay, c, s, cr, sr] = t;
  REQUIRE(cr.ok());
  REQUIRE(sr.ok());
  wire::Frame f;
  SECTION("data") {
    REQUIRE(c->send(wire::MsgType::invoke, Bytes{1}, Bytes(2000)).ok());
    auto got = receive(relay, *s, f, 1000);
    REQUIRE_FALSE(got.ok());
    CHECK(got.error().code() == Errc::limit);
    CHECK(got.error().message() == "wire: frame: 2000 bytes of data (at most 1000)");
    CHECK(f.data.empty());
  }
  SECTION("header") {
    REQUIRE(c->send(wire::MsgType::invoke, Bytes(wire::kMaxHeader + 1), {}).ok());
    auto got = receive(relay, *s, f, 1000);
    REQUIRE_FALSE(got.ok());
    CHECK(got.error().code() == Errc::limit);
  }
  SECTION("a peer that ends the stream between frames") {
    c->close();
    auto got = receive(relay, *s, f, 1000);
    REQUIRE(got.ok());
    CHECK(*got == Io::closed);
  }
}

TEST_CASE("held frames leave together: in order, whole, in few records", "[tls]") {
  const SigningKey node = new_key(), client = new_key();
  auto cred = Credential::self_signed(client);
  REQUIRE(cred.ok());
  size_t to_server = 0;  // bytes on the wire, client to node, after the handshake
  bool counting = false;
  Conversation t(certified_by(node), only(client, false), *cred, only(node, true), [&](Bytes& b, bool to_node) {
    if (to_node && counting) to_server += b.size();
  });
  REQUIRE(t.cr.ok());
  REQUIRE(t.sr.ok());
  counting = true;
  t.client->hold(true);
  CHECK(t.client->holding());
  size_t payload = 0;
  for (uint8_t i = 0; i < 100; ++i) {  // 100 small frames, then a large one, then 5 more small ones
    auto io = t.client->send(wire::MsgType::invoke, Bytes{i}, Bytes(40, i));
    REQUIRE(io.ok());
    CHECK(*io == Io::want_write);  // held: queued, not sent
    payload += wire::kFrameHeaderSize + 1 + 40;
  }
  Bytes large(100 * 1024);
  for (size_t i = 0; i < large.size(); ++i) large[i] = uint8_t(i * 7);
  REQUIRE(t.client->send(wire::MsgType::push, Bytes{200}, large).ok());
  for (uint8_t i = 0; i < 5; ++i) REQUIRE(t.client->send(wire::MsgType::invoke, Bytes{uint8_t(201 + i)}, Bytes(40, i)).ok());
  CHECK_FALSE(t.relay.pump());  // nothing left the client yet
  CHECK(t.client->queued() > large.size());

  t.client->hold(false);
  for (int i = 0; i < 1000 && t.client->queued(); ++i) {
    auto io = t.client->flush();
    REQUIRE(io.ok());
    t.relay.pump();
  }
  CHECK(t.client->queued() == 0);
  wire::Frame f;
  for (uint8_t i = 0; i < 100; ++i) {
    auto io = receive(t.relay, *t.server, f);
    REQUIRE(io.ok());
    REQUIRE(*io == Io::done);
    CHECK(f.type == wire::MsgType::invoke);
    CHECK(f.header == Bytes{i});
    CHECK(f.data == Bytes(40, i));
  }
  auto io = receive(t.relay, *t.server, f, 1 << 20);
  REQUIRE(io.ok());
  CHECK(f.type == wire::MsgType::push);
  CHECK(f.data == large);
  for (uint8_t i = 0; i < 5; ++i) {
    io = receive(t.relay, *t.server, f);
    REQUIRE(io.ok());
    CHECK(f.header == Bytes{uint8_t(201 + i)});
  }
  // TLS 1.3 adds 22 bytes to a record: 106 records for 106 frames would add 2332; the small
  // frames share a few, the large one takes 7.
  const size_t total = payload + wire::kFrameHeaderSize + 1 + large.size() + 5 * (wire::kFrameHeaderSize + 1 + 40);
  CHECK(to_server - total < 22 * 20);
}
