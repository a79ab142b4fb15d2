// xcargo extract: writes one variant's payload out as a plain .o or .bc file.
#include "exit_codes.h"
#include "report.h"
#include "verbs.h"
#include "xcargo/cargo.h"
#include "xcargo/file.h"

namespace xcargo::cli {

Runner add_extract(CLI::App& app) {
  struct Opts {
    std::string cargo, variant, out;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand("extract", "Write one variant out as a plain .o or .bc file");
  cmd->add_option("cargo", o->cargo, "The cargo to read")->required()->type_name("CARGO");
  cmd->add_option("--variant", o->variant, "Variant name, as 'xcargo inspect' lists them")->required()->type_name("NAME");
  cmd->add_option("-o,--output", o->out, "The file to write ('-': standard output)")->required()->type_name("FILE");
  cmd->footer("The payload's digests are checked before anything is written.\n\n" +
              exit_codes_help({kExitOk, kExitVerifyFailed, kExitUsage}));
  return [o] {
    auto bytes = read_cargo_file(o->cargo);
    if (!bytes.ok()) return report(bytes.error(), o->cargo);
    auto cargo = load_cargo(std::move(*bytes), nullptr);
    if (!cargo.ok()) return report(cargo.error(), o->cargo);
    const Variant* v = cargo->manifest().find_variant(o->variant);
    if (!v) {
      std::string names;
      for (const auto& x : cargo->manifest().variants) names += (names.empty() ? "" : ", ") + x.name;
      return report(Error(Errc::invalid_argument, "no variant '" + o->variant + "'").hint("variants in this cargo: " + names),
                    o->cargo);
    }
    auto payload = cargo->variant_payload(*v);
    if (!payload.ok()) return report(payload.error(), o->cargo);
    if (auto s = write_file(o->out, *payload); !s.ok()) return report(s.error(), o->out);
    note("wrote " + o->out + " (" + v->name + " " + variant_kind_name(v->kind) + ", " + std::to_string(payload->size()) +
         " bytes)");
    return 0;
  };
}

}  // namespace xcargo::cli
