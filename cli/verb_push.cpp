// xcargo push: sends a cargo to one or more nodes, skipping nodes that already have it.
#include <cstdio>
#include <sstream>

#include "exit_codes.h"
#include "node_target.h"
#include "report.h"
#include "verbs.h"
#include "xcargo/cargo.h"

namespace xcargo::cli {

Runner add_push(CLI::App& app) {
  struct Opts {
    std::string cargo, to;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand("push", "Load a cargo on one or more nodes");
  cmd->add_option("cargo", o->cargo, "The cargo")->required()->type_name("CARGO");
  cmd->add_option("--to", o->to, "Nodes, comma-separated: HOST:PORT (UCX on a loopback address, TLS to any other), tls://HOST:PORT or ucx://HOST:PORT")->required()->type_name("HOST:PORT[,HOST:PORT...]");
  add_connect_options(*cmd);
  cmd->footer("Each node verifies the cargo against its own trusted keys before loading it.\n"
              "Every node is tried; the exit code is the first failure's.\n\n" +
              exit_codes_help({kExitOk, kExitVerifyFailed, kExitUsage, kExitRemoteFailed, kExitUnreachable, kExitDenied}));
  return [o] {
    auto bytes = read_cargo_file(o->cargo);
    if (!bytes.ok()) return report(bytes.error(), o->cargo);
    // Checked here first (structure and every digest, not trust): a damaged file is reported
    // as such, and never mistaken for the intact cargo a node may already hold.
    auto local = load_cargo(*bytes, nullptr);
    if (!local.ok()) return report(local.error(), o->cargo);
    const Container* container = &local->container();
    std::vector<std::string> nodes;
    std::stringstream ss(o->to);
    for (std::string n; std::getline(ss, n, ',');)
      if (!n.empty()) nodes.push_back(n);
    if (nodes.empty()) return report(Error(Errc::invalid_argument, "--to names no node"));
    int worst = 0;
    for (const auto& node : nodes) {
      auto c = connect_node(node);
      if (!c.ok()) {
        worst = std::max(worst, report(c.error()));
        continue;
      }
      auto loaded = ensure_loaded(**c, *bytes, container->digest);
      if (!loaded.ok()) {
        worst = std::max(worst, report(loaded.error(), o->cargo));
        continue;
      }
      std::printf("%s: %s\n", node.c_str(), *loaded ? "pushed" : "already loaded");
    }
    return worst;
  };
}

}  // namespace xcargo::cli
