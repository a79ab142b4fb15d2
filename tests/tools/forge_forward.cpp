// xcargo-forge-forward: sends a node a `forward` message as if from another loader, with a
// cargo that may be tampered with, and prints the result that comes back to its own address.
// Lets the tests check that a forwarded cargo is verified like a pushed one.
// usage: xcargo-forge-forward --to HOST:PORT --cargo FILE --entry NAME [--flip OFFSET] [--hop N]
//        [--digest-of FILE]   (name another cargo's digest in the header)
//        [--key KEY]          (authenticate first with this key, as a peer node does)
// Prints "auth: VERDICT" when it authenticated, then "STATUS: MESSAGE" of the result; exits 0
// when a result came, 1 if none within 10 s (a loader drops a forward it does not accept).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "raw_client.h"
#include "tool_args.h"
#include "xcargo/cargo.h"
#include "xcargo/identity.h"
#include "xcargo/file.h"
#include "wire/wire.h"

using namespace xcargo;
using Clock = std::chrono::steady_clock;

namespace {

using test::arg;

[[noreturn]] void die(const std::string& what) { test::die("xcargo-forge-forward", what, 2); }

Digest digest_of(const std::string& path) {
  auto b = read_file(path, 1u << 30);
  if (!b.ok()) die(b.error().message());
  auto c = parse_container(*b);
  if (!c.ok()) die(c.error().message());
  return c->digest;
}

}  // namespace

int main(int argc, char** argv) {
  auto cargo = read_file(arg(argc, argv, "--cargo"), 1u << 30);
  if (!cargo.ok()) die(cargo.error().message());
  wire::Forward f;
  f.request_id = 77;
  f.digest = digest_of(arg(argc, argv, "--digest-of", arg(argc, argv, "--cargo").c_str()));
  f.hop = uint32_t(std::atoi(arg(argc, argv, "--hop", "1").c_str()));
  f.from_node = 9;
  f.entry = arg(argc, argv, "--entry");
  if (const std::string flip = arg(argc, argv, "--flip"); !flip.empty()) (*cargo)[std::stoul(flip) % cargo->size()] ^= 0x01;
  f.cargo_size = cargo->size();

  test::RawClient c("xcargo-forge-forward", arg(argc, argv, "--to"));
  auto address = c.worker().address();
  if (!address.ok()) die(address.error().message());
  f.reply_address = *address;
  if (const std::string key_file = arg(argc, argv, "--key"); !key_file.empty()) {
    auto key = SigningKey::load(key_file);
    if (!key.ok()) die(key.error().message());
    c.greet();
    std::printf("auth: %s\n", c.prove(c.proof(*key)).c_str());
  }
  // The result comes on this connection (a refusal) or on one the node opens to reply_address.
  if (!c.ask(wire::MsgType::forward, wire::encode(f), *cargo)) {
    std::printf("no result\n");
    return 1;
  }
  auto res = wire::decode_result(c.answer());
  if (!res.ok()) die(res.error().message());
  std::printf("%s: %s\n", wire::status_name(res->status), res->message.c_str());
  return 0;
}
