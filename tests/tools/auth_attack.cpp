// xcargo-auth-attack: tries to use a loader without proving an authorized key, as a peer on
// the network would (loader/SECURITY.md, "Clients").
// usage: xcargo-auth-attack --to HOST:PORT --key AUTHORIZED_KEY --stranger OTHER_KEY [--idle-s S]
//                           [--other-tenant KEY]
// Every connection's route (at a same-host door) names AUTHORIZED_KEY.
//   requests-first  ls, stats, has, push, invoke and region reads before authenticating
//   stranger        a proof by a key the node does not know
//   forged          the authorized key's id with a signature by another key
//   replay          a valid proof from one connection, replayed on a new connection
//   second-proof    another key's proof on a connection that already authenticated (dropped
//                   unanswered: an authenticated connection takes only requests with its token)
//   unsealed        an authenticated connection's requests without its session token, as
//                   another peer claiming the connection would send them: dropped unanswered
//   idle            a connection that says hello and nothing more is closed (within S s)
//   stray-types     empty messages of every type a client never sends (0, the reply types,
//                   ids past the protocol's up to 65535), with and without UCX's reply flag:
//                   the worker keeps answering
//   flood           20 requests before authenticating: the node closes the connection
//   old-version     a version 2 hello is answered unsupported_version; a proof after it is not taken
//   other-tenant    (with --other-tenant) a proof by KEY, authorized but of another tenant, on a
//                   connection routed to AUTHORIZED_KEY's tenant: refused by that tenant's worker
//   and a control: the authorized key's own proof is accepted and ls is served.
// Prints one "ATTACK: outcome" line each; exits 0 when every attack failed as it should, 1
// when one got through, 2 when the tool itself could not run.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "raw_client.h"
#include "tool_args.h"
#include "auth/auth.h"
#include "xcargo/identity.h"
#include "wire/wire.h"

using namespace xcargo;
using namespace xcargo::wire;
using Clock = std::chrono::steady_clock;

namespace {

[[noreturn]] void die(const std::string& what) { test::die("xcargo-auth-attack", what, 2); }

int g_failures = 0;

void report(const char* attack, bool defended, const std::string& outcome) {
  std::printf("%s: %s: %s\n", attack, defended ? "refused" : "GOT THROUGH", outcome.c_str());
  std::fflush(stdout);
  if (!defended) ++g_failures;
}

// What the node answered to a request made before authenticating: "unauthenticated" is the
// defence; anything else means it was served.
std::string answer_of(test::RawClient& c, MsgType type, const Bytes& header) {
  if (!c.ask(type, header)) return c.lost() ? "connection closed" : "no answer";
  if (auto r = decode_result(c.answer()); r.ok()) return status_name(r->status);
  return "served (a reply of its own type)";
}

SigningKey load(const std::string& path) {
  auto k = SigningKey::load(path);
  if (!k.ok()) die(k.error().message());
  return std::move(*k);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string to = test::arg(argc, argv, "--to");
  if (to.empty()) die("usage: xcargo-auth-attack --to HOST:PORT --key KEY --stranger KEY [--idle-s S] [--other-tenant KEY]");
  const SigningKey key = load(test::arg(argc, argv, "--key")), stranger = load(test::arg(argc, argv, "--stranger"));
  const int idle_s = std::atoi(test::arg(argc, argv, "--idle-s", "30").c_str());
  const door::Route route{key.public_key().raw, ""};
  auto connect = [&] { return test::RawClient("xcargo-auth-attack", to, false, route); };

  if (const std::string other_path = test::arg(argc, argv, "--other-tenant"); !other_path.empty()) {
    const SigningKey other = load(other_path);
    auto c = connect();
    c.greet();
    const std::string s = c.prove(c.proof(other));
    report("other-tenant", s.rfind("unauthenticated", 0) == 0, s);
  }

  {
    auto c = connect();
    for (uint16_t t = 0; t <= kMaxMsgType; t += 2)
      for (bool flag : {false, true}) c.send(t, {}, flag);
    for (uint16_t t : {21, 255, 4096, 16383, 16384, 32767, 32768, 65534, 65535})
      for (bool flag : {false, true}) c.send(t, {}, flag);
    auto probe = connect();
    probe.greet();
    report("stray-types", !probe.lost(), probe.lost() ? "the node went away" : "the node still answers");
  }
  {
    auto c = connect();
    c.greet();
    int answered = 0;
    for (int i = 0; i < 20 && !c.lost(); ++i) answered += c.ask(MsgType::list, encode(RequestOnly{uint64_t(i)}), {}, 3);
    for (int i = 0; i < 50 && !c.lost(); ++i) c.worker().progress_or_wait(100);  // the node closes it shortly after
    report("flood", c.lost(), std::to_string(answered) + " refusals, then the connection was " + (c.lost() ? "closed" : "left open"));
  }
  {
    auto c = connect();
    c.greet(2);
    const std::string status = status_name(c.hello_reply().status);
    const std::string s = c.prove(c.proof(key));
    report("old-version", status == "unsupported_version" && s != "ok", "hello: " + status + "; proof after it: " + s);
  }
  {
    auto c = connect();
    c.greet();
    if (c.hello_reply().auth != AuthMode::required) die(to + ": the node does not require authentication");
    const Digest d{};
    const struct {
      const char* name;
      MsgType type;
      Bytes header;
    } requests[] = {{"ls", MsgType::list, encode(RequestOnly{1})},
                    {"stats", MsgType::stats, encode(RequestOnly{2})},
                    {"has", MsgType::has, encode(Has{3, d})},
                    {"push", MsgType::push, encode(Push{4, 0})},
                    {"invoke", MsgType::invoke, encode(Invoke{5, d, "main", 0})},
                    {"region_read", MsgType::region_read, encode(RegionRead{6, 0, 8, "chase"})}};
    std::string all;
    bool defended = true;
    for (const auto& r : requests) {
      const std::string a = answer_of(c, r.type, r.header);
      all += std::string(all.empty() ? "" : ", ") + r.name + " " + a;
      defended = defended && a == "unauthenticated";
    }
    report("requests-first", defended, all);
    const std::string s = c.prove(c.proof(stranger));
    report("stranger", s.rfind("unauthenticated", 0) == 0, s);
  }
  {
    auto c = connect();
    c.greet();
    Auth forged = c.proof(stranger);
    forged.client_key = key.public_key().raw;  // claims the authorized key
    const std::string s = c.prove(forged);
    report("forged", s.rfind("unauthenticated", 0) == 0, s);
  }
  Auth captured;
  {
    auto c = connect();
    c.greet();
    captured = c.proof(key);
    const std::string s = c.prove(captured);
    std::printf("control: own proof: %s", s.c_str());
    const std::string ls = answer_of(c, MsgType::list, encode(RequestOnly{7}));
    std::printf("; ls: %s\n", ls.c_str());
    if (s != "ok" || ls != "served (a reply of its own type)") ++g_failures;
    const std::string again = c.prove(c.proof(stranger), 3);
    report("second-proof", again != "ok", again);
    const std::string still = answer_of(c, MsgType::list, encode(RequestOnly{8}));
    std::printf("control: after the second proof, ls: %s\n", still.c_str());
    if (still != "served (a reply of its own type)") ++g_failures;
    c.send(uint16_t(MsgType::list), encode(RequestOnly{9}), true);  // no token: as a peer claiming this connection
    const bool answered = c.wait_answer(3);
    report("unsealed", !answered, answered ? "answered" : "dropped unanswered");
  }
  {
    auto c = connect();
    c.greet();
    const std::string s = c.prove(captured);
    report("replay", s.rfind("unauthenticated", 0) == 0, s);
  }
  {
    auto c = connect();
    c.greet();
    const auto t0 = Clock::now();
    const auto deadline = t0 + std::chrono::seconds(idle_s);
    while (!c.lost() && Clock::now() < deadline) c.worker().progress_or_wait(100);
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    char what[96];
    std::snprintf(what, sizeof what, c.lost() ? "closed by the node after %.1f s" : "still open after %.1f s", s);
    report("idle", c.lost(), what);
  }
  return g_failures ? 1 : 0;
}
