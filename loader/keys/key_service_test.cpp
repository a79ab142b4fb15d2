// The key service's process: started with a key file, serving several workers' connections,
// its failures reported.
#include "keys/key_service.h"

#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <thread>

#include "keys/node_key.h"
#include "keys/protocol.h"
#include "support.h"
#include "auth/auth.h"

using namespace xcargo;
using namespace xcargo::loader::keys;
using namespace std::chrono_literals;

namespace {

std::string write_key(const test::ScratchDir& dir, const std::string& name, const std::string& pem) {
  const std::string path = dir / name;
  std::ofstream(path) << pem;
  ::chmod(path.c_str(), 0600);
  return path;
}

bool proves(const NodeKey& k, const PublicKey& expected) {
  wire::Nonce a, b;
  a.fill(5);
  b.fill(6);
  auto sig = k.node_proof(a, b);
  return sig.ok() && ed25519_verify(expected, auth::node_proof(a, b, expected.raw), *sig);
}

}  // namespace

TEST_CASE("the key service loads the key and serves each worker's connection", "[keys]") {
  test::ScratchDir dir;
  const SigningKey node = test::fresh_key();
  const std::string path = write_key(dir, "node.key", node.private_pem());
  auto service = KeyService::start(path, PassphraseSource{"XCARGO_TEST_NO_SUCH_VARIABLE", false}, {});
  REQUIRE(service.ok());
  CHECK(service->public_key().raw == node.public_key().raw);
  CHECK(service->public_key().id == node.public_key().id);

  auto c1 = service->connect(), c2 = service->connect();
  REQUIRE(c1.ok());
  REQUIRE(c2.ok());
  CHECK(c1->id == 1);
  CHECK(c2->id == 2);
  const int fd1 = c1->fd, fd2 = c2->fd;
  ServiceKey one(fd1, service->public_key(), 5s), two(fd2, service->public_key(), 5s);
  CHECK(proves(one, node.public_key()));
  CHECK(proves(two, node.public_key()));
  wire::Nonce a{}, b{};
  wire::RawKey peer{};
  auto client = two.client_proof(a, b, peer);
  REQUIRE(client.ok());
  CHECK(ed25519_verify(node.public_key(), auth::client_proof(a, b, peer, node.public_key().raw), *client));

  // Something else wrote on a connection (a kernel in the worker): its answer is skipped,
  // and a packet that is no request is refused without ending the service.
  const Bytes stray = protocol::node_proof_request(999, a, b);
  REQUIRE(::send(fd1, stray.data(), stray.size(), 0) == ssize_t(stray.size()));
  REQUIRE(::send(fd1, "junk", 4, 0) == 4);
  const Bytes huge(4096, 1);
  REQUIRE(::send(fd1, huge.data(), huge.size(), 0) == ssize_t(huge.size()));
  CHECK(proves(one, node.public_key()));
  CHECK(proves(one, node.public_key()));
  // Answers planted for the ids a worker would ask with next, if they could be guessed
  // (a kernel's, queued on the worker's end): each later question still gets its own.
  for (uint64_t id = 1; id <= 300; ++id) {
    const Bytes planted = protocol::node_proof_request(id, b, a);
    (void)::send(fd1, planted.data(), planted.size(), MSG_DONTWAIT);
  }
  std::this_thread::sleep_for(200ms);  // answered, and queued on the worker's end
  for (int i = 0; i < 5; ++i) CHECK(proves(one, node.public_key()));

  // Concurrent askers on one connection take turns.
  std::vector<std::thread> threads;
  std::atomic<int> good{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 20; ++i) good += proves(two, node.public_key());
    });
  for (auto& t : threads) t.join();
  CHECK(good == 80);

  std::string why;
  CHECK(service->alive(&why));
  const pid_t pid = service->pid();
  { KeyService gone = std::move(*service); }  // the destructor ends it
  CHECK(::kill(pid, 0) != 0);
  auto after = one.node_proof(a, b);
  REQUIRE_FALSE(after.ok());
  CHECK(after.error().code() == Errc::key);
  CHECK(after.error().message().find("the node's key service is gone") != std::string::npos);
}

TEST_CASE("a key service that cannot load its key says why", "[keys]") {
  test::ScratchDir dir;
  const PassphraseSource no_terminal{"XCARGO_TEST_KEY_PASSPHRASE", false};
  auto missing = KeyService::start(dir / "absent.key", no_terminal, {});
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().code() == Errc::key);
  CHECK(missing.error().message().find("absent.key") != std::string::npos);

  const SigningKey node = test::fresh_key();
  const std::string locked = write_key(dir, "locked.key", *node.encrypted_private_pem("right horse"));
  ::setenv("XCARGO_TEST_KEY_PASSPHRASE", "wrong horse", 1);
  auto wrong = KeyService::start(locked, no_terminal, {});
  REQUIRE_FALSE(wrong.ok());
  CHECK(wrong.error().message().find("wrong passphrase") != std::string::npos);
  ::setenv("XCARGO_TEST_KEY_PASSPHRASE", "right horse", 1);
  auto right = KeyService::start(locked, no_terminal, {});
  REQUIRE(right.ok());
  CHECK(right->public_key().raw == node.public_key().raw);
  ::unsetenv("XCARGO_TEST_KEY_PASSPHRASE");

  auto unconfined = KeyService::start("", no_terminal, [](int) -> Status {
    return Error(Errc::io, "no sandbox here").hint("a hint survives the trip");
  });
  REQUIRE_FALSE(unconfined.ok());
  CHECK(unconfined.error().message() == "the key service's sandbox: no sandbox here");
  REQUIRE(unconfined.error().hints().size() == 1);
  CHECK(unconfined.error().hints()[0] == "a hint survives the trip");
}

TEST_CASE("a key service that dies is seen to, and its workers are told", "[keys]") {
  auto service = KeyService::start("", {}, {});  // a new key each start
  REQUIRE(service.ok());
  auto c = service->connect();
  REQUIRE(c.ok());
  ServiceKey key(c->fd, service->public_key(), 5s);
  CHECK(proves(key, service->public_key()));
  REQUIRE(::kill(service->pid(), SIGKILL) == 0);
  std::string why;
  for (int i = 0; i < 500 && service->alive(&why); ++i) std::this_thread::sleep_for(10ms);
  CHECK(why == "killed by signal 9 (Killed)");
  CHECK_FALSE(proves(key, service->public_key()));
  CHECK_FALSE(service->connect().ok());
}

TEST_CASE("a worker's connection ends with the worker, whoever holds it", "[keys]") {
  auto service = KeyService::start("", {}, {});
  REQUIRE(service.ok());
  auto a = service->connect(), b = service->connect();
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  ServiceKey first(a->fd, service->public_key(), 5s), second(b->fd, service->public_key(), 5s);
  // A packet of no bytes is no end of the connection.
  REQUIRE(::send(a->fd, "", 0, 0) == 0);
  CHECK(proves(first, service->public_key()));
  // The supervisor says the first worker ended: its connection is closed by the service,
  // the other one serves on.
  service->disconnect(a->id);
  auto after = first.node_proof({}, {});
  for (int i = 0; i < 500 && after.ok(); ++i) {  // a request sent before it took the word is answered
    std::this_thread::sleep_for(10ms);
    after = first.node_proof({}, {});
  }
  REQUIRE_FALSE(after.ok());
  CHECK(after.error().message().find("is gone") != std::string::npos);
  CHECK(proves(second, service->public_key()));
  // Past kMaxConnections, the oldest goes: here the second.
  std::vector<std::unique_ptr<ServiceKey>> more;
  for (size_t i = 0; i < kMaxConnections; ++i) {
    auto c = service->connect();
    REQUIRE(c.ok());
    more.push_back(std::make_unique<ServiceKey>(c->fd, service->public_key(), 5s));
  }
  CHECK(proves(*more.back(), service->public_key()));
  CHECK(proves(*more.front(), service->public_key()));
  CHECK_FALSE(proves(second, service->public_key()));
}

TEST_CASE("the key service certifies a worker's TLS key with the node key, and nothing else", "[keys]") {
  test::ScratchDir dir;
  const SigningKey node = test::fresh_key();
  const std::string path = write_key(dir, "node.key", node.private_pem());
  auto service = KeyService::start(path, PassphraseSource{"XCARGO_TEST_NO_SUCH_VARIABLE", false}, {});
  REQUIRE(service.ok());
  auto c = service->connect();
  REQUIRE(c.ok());
  ServiceKey worker(c->fd, service->public_key(), 5s);
  auto cred = worker.tls_credential();
  REQUIRE(cred.ok());
  REQUIRE(cred->chain.size() == 2);
  // A client that pins the node key accepts the chain: the TLS key, certified by the node key.
  const SigningKey client = test::fresh_key();
  auto client_cred = tls::Credential::self_signed(client);
  REQUIRE(client_cred.ok());
  auto server_ctx = tls::Context::create(tls::Context::server, *cred, [](const tls::Peer&, std::string*) { return true; });
  auto client_ctx = tls::Context::create(tls::Context::client, *client_cred, [&](const tls::Peer& p, std::string*) {
    return p.certified && p.identity == node.public_key().raw;
  });
  REQUIRE(server_ctx.ok());
  REQUIRE(client_ctx.ok());
  int fds[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0);
  auto s = tls::Channel::start(*server_ctx, fds[1]);
  auto cl = tls::Channel::start(*client_ctx, fds[0]);
  REQUIRE(s.ok());
  REQUIRE(cl.ok());
  std::thread t([&] { CHECK((*s)->handshake().ok()); });
  auto r = (*cl)->handshake();
  t.join();
  REQUIRE(r.ok());
  CHECK((*cl)->peer().identity == node.public_key().raw);
  // A request of the right kind and the wrong length is refused, as any other.
  Bytes wrong = protocol::certificate_request(5, wire::RawKey{});
  wrong.push_back(0);
  auto reply = protocol::parse_reply(protocol::answer(HeldKey(test::fresh_key()), wrong));
  REQUIRE(reply);
  CHECK_FALSE(reply->certificate);
  CHECK(reply->reason == "a request of 42 bytes, not the 41 its kind has");
}
