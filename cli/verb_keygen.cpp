// xcargo keygen: writes an Ed25519 signing key (mode 0600) and its public key.
#include <cstdio>

#include "report.h"
#include "verbs.h"
#include "xcargo/keys.h"

namespace xcargo::cli {

Runner add_keygen(CLI::App& app) {
  struct Opts {
    std::string out;
    bool force = false;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand("keygen", "Make an Ed25519 signing key: KEY (private, 0600) and KEY.pub");
  cmd->add_option("-o,--output", o->out, "Path of the private key; the public key goes to PATH.pub")->required()->type_name("PATH");
  cmd->add_flag("--force", o->force, "Overwrite existing key files");
  cmd->footer("Copy KEY.pub into the trust directory of every verifier and loader that should accept\n"
              "cargos signed with KEY. Keep KEY secret.");
  return [o] {
    if (o->out == "-")
      return report(Error(Errc::invalid_argument, "keygen writes two files, KEY and KEY.pub: '-' (standard output) cannot hold them")
                        .hint("give a path: xcargo keygen -o ci.key"));
    auto key = generate_key_files(o->out, o->force);
    if (!key.ok()) return report(key.error());
    std::printf("key id %s\nprivate key %s\npublic key %s.pub\n", to_hex(key->public_key().id).c_str(), o->out.c_str(),
                o->out.c_str());
    return 0;
  };
}

}  // namespace xcargo::cli
