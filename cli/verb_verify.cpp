// xcargo verify: checks a cargo completely, including a signature by a trusted key.
#include <cstdio>

#include "describe.h"
#include "exit_codes.h"
#include "report.h"
#include "verbs.h"

namespace xcargo::cli {

Runner add_verify(CLI::App& app) {
  struct Opts {
    std::string cargo, trust;
    bool json = false;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand("verify", "Check a cargo's structure, digests and signatures");
  cmd->add_option("cargo", o->cargo, "The cargo to verify")->required()->type_name("CARGO");
  cmd->add_option("--trust", o->trust, "A trusted .pub key, or a directory of them")->required()->type_name("PATH");
  cmd->add_flag("--json", o->json, "Print the result as JSON on stdout");
  cmd->footer("A cargo is valid when it is intact and signed by a key of the trust store that is not revoked.\n\n" +
              exit_codes_help({kExitOk, kExitVerifyFailed, kExitUsage}));
  return [o] {
    set_json_output(o->json);
    auto fail = [&](const Error& e, const std::string& subject) {
      if (o->json) print_json({{"ok", false}, {"file", o->cargo}, {"error", error_json(e)}, {"exit_code", exit_code_for(e.code())}});
      return report(e, subject);
    };
    auto trust = TrustStore::load(o->trust);
    if (!trust.ok()) return fail(trust.error(), "");
    auto bytes = read_cargo_file(o->cargo);
    if (!bytes.ok()) return fail(bytes.error(), o->cargo);
    auto cargo = load_cargo(std::move(*bytes), &*trust);
    if (!cargo.ok()) return fail(cargo.error(), o->cargo);
    if (o->json) {
      nlohmann::json j = cargo_json(*cargo, o->cargo, true);
      j["ok"] = true;
      print_json(j);
      return 0;
    }
    std::string signers;
    for (const auto& s : cargo->signers())
      if (s.trusted) signers += (signers.empty() ? "" : ", ") + to_hex(s.key_id) + " (" + s.key_source + ")";
    std::printf("%s: ok: %s %s, digest %s, signed by %s\n", o->cargo.c_str(), cargo->manifest().name.c_str(),
                cargo->manifest().version.c_str(), to_hex(cargo->digest()).c_str(), signers.c_str());
    return 0;
  };
}

}  // namespace xcargo::cli
