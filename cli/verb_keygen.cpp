// xcargo keygen: writes an Ed25519 signing key (mode 0600, optionally encrypted) and its public key.
#include <cstdio>

#include "exit_codes.h"
#include "key_files.h"
#include "report.h"
#include "verbs.h"
#include "build/keys.h"

namespace xcargo::cli {

Runner add_keygen(CLI::App& app) {
  struct Opts {
    std::string out;
    bool force = false, encrypt = false;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand("keygen", "Make an Ed25519 signing key: KEY (private, 0600) and KEY.pub");
  cmd->add_option("-o,--output", o->out, "Path of the private key; the public key goes to PATH.pub")->required()->type_name("PATH");
  cmd->add_flag("--force", o->force, "Overwrite existing key files");
  cmd->add_flag("--encrypt", o->encrypt,
                "Encrypt KEY with a passphrase (PKCS#8, scrypt + AES-256), typed twice on the terminal,\n"
                "or taken from $XCARGO_PASSPHRASE or the variable --passphrase-env VAR names");
  cmd->footer("Copy KEY.pub into the trust directory of every verifier and loader that should accept\n"
              "cargos signed with KEY. Keep KEY secret: xcargo refuses a KEY that others may read.\n"
              "An encrypted KEY asks for its passphrase whenever it is used. In CI, with the passphrase\n"
              "in a variable from the job's secrets (never on the command line):\n"
              "  xcargo keygen -o ci.key --encrypt --passphrase-env CI_KEY_PASSPHRASE\n"
              "  xcargo build k.c -o k.xcargo --key ci.key --passphrase-env CI_KEY_PASSPHRASE\n\n" +
              exit_codes_help({kExitOk, kExitUsage}));
  return [o] {
    if (o->out == "-")
      return report(Error(Errc::invalid_argument, "keygen writes two files, KEY and KEY.pub: '-' (standard output) cannot hold them")
                        .hint("give a path: xcargo keygen -o ci.key"));
    const PassphraseSource source = passphrase_source();
    auto key = generate_key_files(o->out, o->force, o->encrypt ? &source : nullptr);
    if (!key.ok()) return report(key.error());
    std::printf("key id %s\nprivate key %s%s\npublic key %s.pub\n", to_hex(key->public_key().id).c_str(), o->out.c_str(),
                o->encrypt ? " (encrypted)" : "", o->out.c_str());
    return 0;
  };
}

}  // namespace xcargo::cli
