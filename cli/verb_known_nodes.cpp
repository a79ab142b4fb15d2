// xcargo known-nodes: the node keys this user's TLS connections expect (libcargo/auth/known_nodes.h).
#include <cstdio>

#include "exit_codes.h"
#include "report.h"
#include "verbs.h"
#include "auth/known_nodes.h"
#include "xcargo/trust.h"

namespace xcargo::cli {

Runner add_known_nodes(CLI::App& app) {
  struct Opts {
    std::string file, address, pub, name;
    CLI::App* add = nullptr;
    CLI::App* list = nullptr;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand("known-nodes", "Pin or list the node keys that connections to tls://HOST:PORT expect");
  cmd->add_option("--file", o->file, "The known-nodes file (default: $XCARGO_KNOWN_NODES, else ~/.config/xcargo/known_nodes)")
      ->type_name("PATH");
  cmd->require_subcommand(1);
  o->add = cmd->add_subcommand("add", "Pin HOST:PORT to the node key in NODE.pub");
  o->add->add_option("address", o->address, "The node's front door, as --to gives it after tls://")->required()->type_name("HOST:PORT");
  o->add->add_option("key", o->pub, "The node's public key (the .pub beside its --node-key)")->required()->type_name("NODE.pub");
  o->add->add_option("--name", o->name, "A name for the line (default: the key's id)");
  o->list = cmd->add_subcommand("list", "Show the pinned nodes: address, key id, name");
  cmd->footer("A client connecting to tls://HOST:PORT stops unless the node proves the key pinned for\n"
              "HOST:PORT (as ssh does with known_hosts). Get NODE.pub from the node's admin, over a\n"
              "channel you trust, then:\n"
              "  xcargo known-nodes add node1.example.org:7401 node1.pub\n"
              "  xcargo run k.xcargo --entry main --to tls://node1.example.org:7401\n\n" +
              exit_codes_help({kExitOk, kExitUsage}));
  return [o] {
    const std::string path = o->file.empty() ? auth::default_known_nodes_path() : o->file;
    if (path.empty())
      return report(Error(Errc::invalid_argument, "known-nodes: no file: there is no home directory")
                        .hint("pass --file PATH or set XCARGO_KNOWN_NODES"));
    if (o->add->parsed()) {
      auto key = load_public_key(o->pub);
      if (!key.ok()) return report(key.error());
      if (auto s = auth::KnownNodes::add(path, o->address, *key, o->name); !s.ok()) return report(s.error());
      std::printf("%s: %s pinned to key %s\n", path.c_str(), o->address.c_str(), to_hex(key->id).c_str());
      return 0;
    }
    auto known = auth::KnownNodes::load(path);
    if (!known.ok()) return report(known.error());
    for (const auto& n : known->all()) std::printf("%s\t%s\t%s\n", n.address.c_str(), to_hex(n.key.id).c_str(), n.name.c_str());
    return 0;
  };
}

}  // namespace xcargo::cli
