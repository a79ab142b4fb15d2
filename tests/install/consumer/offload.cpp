// Pushes the cargo this project built to the node at argv[1] and runs scale(argv[2]),
// printing the result and the variant that ran. Uses only the installed client API.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <xcargo/cargo.h>
#include <xcargo/client.h>
#include <xcargo/version.h>

#ifndef SCALE_CARGO
#define SCALE_CARGO "scale.xcargo"  // where the README's CMake example builds it
#endif

int main(int argc, char** argv) {
  if (argc != 3) return std::fprintf(stderr, "usage: offload HOST:PORT X\n"), 2;
  auto bytes = xcargo::read_cargo_file(SCALE_CARGO);
  if (!bytes.ok()) return std::fprintf(stderr, "%s\n", bytes.error().message().c_str()), 2;
  auto cargo = xcargo::parse_container(*bytes);
  if (!cargo.ok()) return std::fprintf(stderr, "%s\n", cargo.error().message().c_str()), 1;
  auto node = xcargo::client::connect(argv[1]);
  if (!node.ok()) return std::fprintf(stderr, "%s\n", node.error().message().c_str()), 4;
  auto pushed = (*node)->push(*bytes);
  if (!pushed.ok() || pushed->status != xcargo::wire::ReplyStatus::ok)
    return std::fprintf(stderr, "push refused: %s\n", pushed.ok() ? pushed->message.c_str() : pushed.error().message().c_str()), 1;
  int64_t x = std::strtoll(argv[2], nullptr, 10);
  xcargo::Bytes input(sizeof x);
  std::memcpy(input.data(), &x, sizeof x);
  auto r = (*node)->invoke(cargo->digest, "scale", input);
  if (!r.ok()) return std::fprintf(stderr, "%s\n", r.error().message().c_str()), 4;
  if (r->result.status != xcargo::wire::ReplyStatus::ok || r->output.size() != 8)
    return std::fprintf(stderr, "%s: %s\n", xcargo::wire::status_name(r->result.status), r->result.message.c_str()), 3;
  int64_t y;
  std::memcpy(&y, r->output.data(), 8);
  std::printf("%lld variant %s (client library %s)\n", (long long)y, r->result.variant.c_str(), XCARGO_VERSION_STRING);
  return 0;
}
