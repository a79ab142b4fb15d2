// xcargo-invoke-only: invokes an entry of a cargo the node already holds, without asking
// whether it has it and without pushing it (as `xcargo run` would): what a client that
// pushed earlier sees after the node's trust changed. With CANCEL_MS, another thread calls
// Connection::cancel_invoke() that long after the invoke began.
// usage: xcargo-invoke-only HOST:PORT CARGO ENTRY [CANCEL_MS]
// Prints "STATUS: message" (or the output's size); exits 0 on ok, 3 on any other status,
// 4 if the node cannot be reached, 2 on a bad cargo file.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "tool_args.h"
#include "xcargo/cargo.h"
#include "xcargo/client.h"

using namespace xcargo;

int main(int argc, char** argv) {
  if (argc != 4 && argc != 5) test::die("xcargo-invoke-only", "usage: xcargo-invoke-only HOST:PORT CARGO ENTRY [CANCEL_MS]", 2);
  auto bytes = read_cargo_file(argv[2]);
  if (!bytes.ok()) test::die("xcargo-invoke-only", std::string(argv[2]) + ": " + bytes.error().message(), 2);
  auto c = parse_container(*bytes);
  if (!c.ok()) test::die("xcargo-invoke-only", std::string(argv[2]) + ": " + c.error().message(), 2);
  auto node = client::connect(argv[1]);
  if (!node.ok()) test::die("xcargo-invoke-only", node.error().message(), 4);
  std::thread canceller;
  if (argc == 5) {
    const int ms = std::atoi(argv[4]);
    canceller = std::thread([&, ms] {
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
      (*node)->cancel_invoke();
    });
  }
  auto r = (*node)->invoke(c->digest, argv[3], {});
  if (canceller.joinable()) canceller.join();
  if (!r.ok()) test::die("xcargo-invoke-only", r.error().message(), 4);
  std::printf("%s: %s\n", wire::status_name(r->result.status),
              r->result.status == wire::ReplyStatus::ok ? (std::to_string(r->output.size()) + " bytes").c_str()
                                                        : r->result.message.c_str());
  (*node)->close();
  return r->result.status == wire::ReplyStatus::ok ? 0 : 3;
}
