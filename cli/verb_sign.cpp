// xcargo sign: adds a signature to a cargo (co-signing and key rotation keep the others).
#include "exit_codes.h"
#include "key_files.h"
#include "report.h"
#include "verbs.h"
#include "xcargo/cargo.h"
#include "xcargo/file.h"
#include "build/keys.h"

namespace xcargo::cli {

Runner add_sign(CLI::App& app) {
  struct Opts {
    std::string cargo, key, out;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand("sign", "Add a signature to a cargo");
  cmd->add_option("cargo", o->cargo, "The cargo to sign")->required()->type_name("CARGO");
  cmd->add_option("--key", o->key, "Private key (from 'xcargo keygen')")->required()->type_name("KEY");
  cmd->add_option("-o,--output", o->out, "Write the signed cargo here instead of in place ('-': standard output)")->type_name("FILE");
  cmd->footer("Existing signatures are kept; signing twice with the same key changes nothing.\n"
              "The cargo's digest (its identity) does not change when signatures are added.\n" +
              std::string(kKeyFileHelp) + "\n\n" + exit_codes_help({kExitOk, kExitVerifyFailed, kExitUsage}));
  return [o] {
    auto key = load_key(o->key);
    if (!key.ok()) return report(key.error());
    auto bytes = read_cargo_file(o->cargo);
    if (!bytes.ok()) return report(bytes.error(), o->cargo);
    bool already = false;
    auto signed_bytes = sign_cargo(*bytes, *key, &already);
    if (!signed_bytes.ok()) return report(signed_bytes.error(), o->cargo);
    const std::string out = o->out.empty() ? o->cargo : o->out;
    if (already && out == o->cargo) {
      note(o->cargo + ": already signed by key " + to_hex(key->public_key().id) + "; unchanged");
      return 0;
    }
    if (auto s = write_file(out, *signed_bytes); !s.ok()) return report(s.error(), out);
    note(out + ": signed by key " + to_hex(key->public_key().id));
    return 0;
  };
}

}  // namespace xcargo::cli
