// xcargo inspect: shows a cargo's manifest, variants, sizes, digests and signers.
#include <cstdio>
#include <optional>

#include "describe.h"
#include "exit_codes.h"
#include "report.h"
#include "verbs.h"

namespace xcargo::cli {

Runner add_inspect(CLI::App& app) {
  struct Opts {
    std::string cargo, trust;
    bool json = false;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand("inspect", "Show what a cargo holds");
  cmd->add_option("cargo", o->cargo, "The cargo to inspect")->required()->type_name("CARGO");
  cmd->add_option("--trust", o->trust, "Also check signatures against these keys (a .pub file or a directory)")->type_name("PATH");
  cmd->add_flag("--json", o->json, "Print JSON on stdout");
  cmd->footer("Structure, manifest and digests are always checked; signatures only with --trust.\n"
              "Use 'xcargo verify' to decide whether to trust a cargo.\n\n" +
              exit_codes_help({kExitOk, kExitVerifyFailed, kExitUsage}));
  return [o] {
    set_json_output(o->json);
    std::optional<TrustStore> trust;
    if (!o->trust.empty()) {
      auto t = TrustStore::load(o->trust);
      if (!t.ok()) return report(t.error());
      trust = std::move(*t);
    }
    auto bytes = read_cargo_file(o->cargo);
    if (!bytes.ok()) return report(bytes.error(), o->cargo);
    auto cargo = load_cargo(std::move(*bytes), trust ? &*trust : nullptr);
    if (!cargo.ok()) return report(cargo.error(), o->cargo);
    if (o->json) {
      nlohmann::json j = cargo_json(*cargo, o->cargo, trust.has_value());
      j["ok"] = true;
      print_json(j);
    }
    else std::fputs(cargo_text(*cargo, o->cargo, trust.has_value()).c_str(), stdout);
    return 0;
  };
}

}  // namespace xcargo::cli
