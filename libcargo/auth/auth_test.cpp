// Tests of authentication's pieces: proofs bind both nonces and both keys, verbs parse, the
// authorized-keys file refuses what it cannot read, and the loader's gate (AuthGate) admits
// exactly the keys and verbs it was given.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <filesystem>

#include "server/auth_gate.h"
#include "support.h"
#include "auth/auth.h"
#include "xcargo/file.h"
#include "xcargo/identity.h"

using namespace xcargo;
using namespace xcargo::wire;

namespace {

std::string b64_of(const PublicKey& k) {
  const std::string pem = public_key_to_pem(k);
  const size_t a = pem.find('\n'), b = pem.find('\n', a + 1);
  return pem.substr(a + 1, b - a - 1);
}

// A client's whole handshake against gate: hello, then a proof by `signer` claiming `claimed`.
AuthReply handshake(const loader::AuthGate& gate, loader::AuthGate::Session& s, const SigningKey& signer,
                    const PublicKey& claimed) {
  Hello h;
  h.nonce = *auth::random_nonce();
  HelloReply r;
  REQUIRE(gate.greet(s, h, r).ok());
  PublicKey node;
  node.raw = r.node_key;
  CHECK(ed25519_verify(node, auth::node_proof(h.nonce, r.nonce, r.node_key), r.node_sig));
  auto sig = signer.sign(auth::client_proof(h.nonce, r.nonce, r.node_key, claimed.raw));
  REQUIRE(sig.ok());
  std::string line;
  return gate.check(s, Auth{1, claimed.raw, *sig}, &line);
}

}  // namespace

TEST_CASE("proofs bind both nonces and both keys", "[auth]") {
  auth::Nonce a{}, b{};
  a[0] = 1;
  b[0] = 2;
  std::array<uint8_t, 32> k1{}, k2{};
  k2[5] = 9;
  const Bytes p = auth::client_proof(a, b, k1, k2);
  CHECK(p != auth::client_proof(b, a, k1, k2));
  CHECK(p != auth::client_proof(a, b, k2, k2));
  CHECK(p != auth::client_proof(a, b, k1, k1));
  CHECK(auth::node_proof(a, b, k1) != auth::node_proof(a, b, k2));
  const Bytes n = auth::node_proof(a, b, k1);
  CHECK(Bytes(p.begin(), p.begin() + 8) != Bytes(n.begin(), n.begin() + 8));  // different contexts
  CHECK(*auth::random_nonce() != *auth::random_nonce());
}

TEST_CASE("verbs parse and print", "[auth]") {
  CHECK(*auth::parse_verbs("push,run") == (auth::kPush | auth::kRun));
  CHECK(*auth::parse_verbs("ls") == auth::kList);
  CHECK(auth::verbs_text(auth::kAllClientVerbs) == "push,run,ls,read");
  CHECK_FALSE(auth::parse_verbs("push,fly").ok());
  CHECK_FALSE(auth::parse_verbs("").ok());
}

TEST_CASE("authorized-keys files", "[auth]") {
  const SigningKey alice = test::fresh_key(), bob = test::fresh_key();
  const std::string text = "# clients\n\nverbs=ls,read " + b64_of(alice.public_key()) + " alice at home\n" +
                           b64_of(bob.public_key()) + "\n";
  auto keys = auth::AuthorizedKeys::parse(text, "clients.txt");
  REQUIRE(keys.ok());
  REQUIRE(keys->size() == 2);
  const auth::AuthorizedKey* a = keys->find(alice.public_key().raw);
  REQUIRE(a);
  CHECK(a->verbs == (auth::kList | auth::kRead));
  CHECK(a->name == "alice at home");
  CHECK(keys->find(bob.public_key().raw)->verbs == auth::kAllClientVerbs);
  CHECK(keys->find(test::fresh_key().public_key().raw) == nullptr);
  CHECK(auth::AuthorizedKeys::parse(auth::authorized_line(alice.public_key(), auth::kRun, "a"), "x")->find(alice.public_key().raw)->verbs ==
        auth::kRun);

  auto bad = auth::AuthorizedKeys::parse("verbs=ls\n", "c.txt");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message() == "c.txt: line 1: no key");
  bad = auth::AuthorizedKeys::parse("\n" + std::string("AAAA not-a-key\n"), "c.txt");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message().rfind("c.txt: line 2:", 0) == 0);
  CHECK_FALSE(auth::AuthorizedKeys::parse("verbs=fly " + b64_of(alice.public_key()), "c.txt").ok());
  CHECK_FALSE(auth::AuthorizedKeys::load("/nonexistent/clients").ok());

  // A FIFO named like a key in a clients directory is refused, not waited on.
  test::ScratchDir dir;
  REQUIRE(::mkfifo((dir / "mallory.pub").c_str(), 0600) == 0);
  auto fifo = auth::AuthorizedKeys::load(dir.path());
  REQUIRE_FALSE(fifo.ok());
  CHECK(fifo.error().message().find("mallory.pub: not a regular file") != std::string::npos);
}

TEST_CASE("a clients file names tenants: keys that share their work", "[auth]") {
  const SigningKey alice = test::fresh_key(), bob = test::fresh_key(), carol = test::fresh_key();
  const std::string text = "tenant=lab-1 " + b64_of(alice.public_key()) + " alice\n" +  //
                           "verbs=run tenant=lab-1 " + b64_of(bob.public_key()) + "\n" +    //
                           "tenant=x_2 verbs=ls " + b64_of(carol.public_key()) + "\n";
  auto keys = auth::AuthorizedKeys::parse(text, "clients.txt");
  REQUIRE(keys.ok());
  CHECK(keys->find(alice.public_key().raw)->tenant == "lab-1");
  CHECK(keys->find(alice.public_key().raw)->verbs == auth::kAllClientVerbs);
  CHECK(keys->find(bob.public_key().raw)->tenant == "lab-1");
  CHECK(keys->find(bob.public_key().raw)->verbs == auth::kRun);
  CHECK(keys->find(carol.public_key().raw)->tenant == "x_2");
  CHECK(keys->find(carol.public_key().raw)->verbs == auth::kList);
  // The line a loader hands its workers keeps the tenant.
  auto again = auth::AuthorizedKeys::parse(auth::authorized_line(bob.public_key(), auth::kRun, "bob", "lab-1"), "x");
  REQUIRE(again.ok());
  CHECK(again->find(bob.public_key().raw)->tenant == "lab-1");
  CHECK(again->find(bob.public_key().raw)->name == "bob");

  for (const std::string& name : std::vector<std::string>{"", "-a", "_a", "Lab", "a b", "a/b", "..", std::string(33, 'a')})
    CHECK_FALSE(auth::is_tenant_name(name));
  for (const std::string& name : std::vector<std::string>{"a", "0", "lab-1", "x_2", std::string(32, 'z')})
    CHECK(auth::is_tenant_name(name));
  auto bad = auth::AuthorizedKeys::parse("tenant=../etc " + b64_of(alice.public_key()), "c.txt");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message() == "c.txt: line 1: 'tenant=../etc' is no tenant name");
  bad = auth::AuthorizedKeys::parse("tenant=a tenant=b " + b64_of(alice.public_key()), "c.txt");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message() == "c.txt: line 1: 'tenant=' given twice");
  bad = auth::AuthorizedKeys::parse("tenant=a\n", "c.txt");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message() == "c.txt: line 1: no key");
}

// Issue 48: a clients.txt dropped into a clients directory was ignored without a word.
TEST_CASE("a clients directory names the entries it ignores, and what it expects", "[auth]") {
  const SigningKey alice = test::fresh_key(), bob = test::fresh_key();
  test::ScratchDir dir;
  const std::string pem = public_key_to_pem(alice.public_key());
  REQUIRE(write_file(dir / "alice.pub", as_bytes(pem)).ok());
  REQUIRE(write_file(dir / "clients.txt", as_bytes("verbs=run,ls " + b64_of(bob.public_key()) + " bob\n")).ok());
  std::filesystem::create_directory(dir / "old");
  auto keys = auth::AuthorizedKeys::load(dir.path());
  REQUIRE(keys.ok());
  CHECK(keys->size() == 1);
  CHECK(keys->find(bob.public_key().raw) == nullptr);
  REQUIRE(keys->ignored().size() == 2);
  CHECK(keys->ignored()[0].starts_with(std::string(dir / "clients.txt") + ": ignored, not a .pub file: "));
  CHECK(keys->ignored()[0].find("give --clients a file of 'verbs=LIST KEY NAME' lines") != std::string::npos);
  CHECK(keys->ignored()[1].starts_with(std::string(dir / "old") + ": ignored, a directory: "));
  // The same lines as a clients file: bob with his verbs, nothing ignored.
  auto file = auth::AuthorizedKeys::load(dir / "clients.txt");
  REQUIRE(file.ok());
  REQUIRE(file->find(bob.public_key().raw) != nullptr);
  CHECK(file->find(bob.public_key().raw)->verbs == (auth::kRun | auth::kList));
  CHECK(file->ignored().empty());
}

TEST_CASE("the gate admits authorized keys, for their verbs only", "[auth]") {
  const SigningKey node = test::fresh_key(), alice = test::fresh_key(), mallory = test::fresh_key();
  auth::AuthorizedKeys keys;
  keys.add({alice.public_key(), auth::kList, "alice"});
  const loader::AuthGate gate(std::make_shared<loader::keys::HeldKey>(node), keys);
  CHECK(gate.mode() == AuthMode::required);

  loader::AuthGate::Session s;
  CHECK_FALSE(gate.permits(s, MsgType::list));
  CHECK(gate.permits(s, MsgType::hello));
  CHECK(gate.permits(s, MsgType::auth));
  AuthReply r = handshake(gate, s, alice, alice.public_key());
  CHECK(r.status == ReplyStatus::ok);
  // Later requests must end with the session's token.
  Bytes req = encode(RequestOnly{5});
  ByteView body;
  CHECK_FALSE(loader::AuthGate::sealed(s, req, &body));
  Bytes with = req;
  with.insert(with.end(), r.token.begin(), r.token.end());
  REQUIRE(loader::AuthGate::sealed(s, with, &body));
  CHECK(Bytes(body.begin(), body.end()) == req);
  with.back() ^= 1;
  CHECK_FALSE(loader::AuthGate::sealed(s, with, &body));
  loader::AuthGate::Session s2;
  CHECK(handshake(gate, s2, alice, alice.public_key()).token != r.token);  // one per session
  CHECK(r.verbs == auth::kList);
  CHECK(gate.permits(s, MsgType::list));
  CHECK(gate.permits(s, MsgType::stats));
  CHECK_FALSE(gate.permits(s, MsgType::push));
  CHECK_FALSE(gate.permits(s, MsgType::invoke));
  CHECK_FALSE(gate.permits(s, MsgType::forward));
  CHECK_FALSE(gate.permits(s, MsgType::result));  // not a request
  CHECK(gate.refusal(s, MsgType::push) == "key " + to_hex(alice.public_key().id) + " (alice) may ls, not push");

  loader::AuthGate::Session m;
  CHECK(handshake(gate, m, mallory, mallory.public_key()).status == ReplyStatus::unauthenticated);  // unknown key
  loader::AuthGate::Session f;
  CHECK(handshake(gate, f, mallory, alice.public_key()).status == ReplyStatus::unauthenticated);  // claims alice
  CHECK_FALSE(gate.permits(f, MsgType::list));
  loader::AuthGate::Session none;
  std::string line;
  CHECK(gate.check(none, Auth{}, &line).status == ReplyStatus::unauthenticated);  // auth before hello
}

TEST_CASE("an open gate serves anyone and still checks proofs", "[auth]") {
  const SigningKey node = test::fresh_key(), anyone = test::fresh_key(), other = test::fresh_key();
  const loader::AuthGate gate(std::make_shared<loader::keys::HeldKey>(node), std::nullopt);
  CHECK(gate.mode() == AuthMode::optional);
  loader::AuthGate::Session s;
  CHECK(gate.permits(s, MsgType::invoke));
  CHECK(gate.permits(s, MsgType::forward));
  CHECK(handshake(gate, s, anyone, anyone.public_key()).status == ReplyStatus::ok);
  loader::AuthGate::Session f;
  CHECK(handshake(gate, f, other, anyone.public_key()).status == ReplyStatus::unauthenticated);
}
