// client-api: injecting code from a program, without the CLI. Connects to a loader, pushes a
// signed cargo unless the node has it, invokes an entry, closes.
//
// usage: client-api HOST:PORT CARGO ENTRY [i64 ...]   e.g. client-api 127.0.0.1:7400 hello.xcargo add 2 40
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "xcargo/cargo.h"
#include "xcargo/client.h"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s HOST:PORT CARGO ENTRY [i64 ...]\n", argv[0]);
    return 2;
  }
  auto bytes = xcargo::read_cargo_file(argv[2]);
  if (!bytes.ok()) return std::fprintf(stderr, "%s: %s\n", argv[2], bytes.error().message().c_str()), 2;
  auto cargo = xcargo::parse_container(*bytes);  // its digest is the cargo's identity
  if (!cargo.ok()) return std::fprintf(stderr, "%s: %s\n", argv[2], cargo.error().message().c_str()), 1;

  auto node = xcargo::client::connect(argv[1]);
  if (!node.ok()) return std::fprintf(stderr, "%s\n", node.error().message().c_str()), 4;
  auto& c = **node;

  auto has = c.has(cargo->digest);
  if (has.ok() && !*has) {
    auto pushed = c.push(*bytes);  // the node verifies it against its own trusted keys
    if (!pushed.ok() || pushed->status != xcargo::wire::ReplyStatus::ok)
      return std::fprintf(stderr, "push refused: %s\n", pushed.ok() ? pushed->message.c_str() : pushed.error().message().c_str()), 1;
  }

  xcargo::Bytes input;
  for (int i = 4; i < argc; ++i) {
    int64_t v = std::strtoll(argv[i], nullptr, 10);
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    input.insert(input.end(), p, p + sizeof v);
  }
  auto r = c.invoke(cargo->digest, argv[3], input);
  if (!r.ok()) return std::fprintf(stderr, "%s\n", r.error().message().c_str()), 4;
  if (r->result.status != xcargo::wire::ReplyStatus::ok)
    return std::fprintf(stderr, "%s: %s\n", xcargo::wire::status_name(r->result.status), r->result.message.c_str()), 3;
  if (r->output.size() == 8) {
    int64_t v;
    std::memcpy(&v, r->output.data(), 8);
    std::printf("%lld (variant %s)\n", (long long)v, r->result.variant.c_str());
  } else {
    std::printf("%zu bytes (variant %s)\n", r->output.size(), r->result.variant.c_str());
  }
  c.close();
  return 0;
}
