// xcargo ls: what a node has loaded, with variants and invocation counts, and its statistics.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "describe.h"
#include "exit_codes.h"
#include "node_target.h"
#include "report.h"
#include "verbs.h"

namespace xcargo::cli {

Runner add_ls(CLI::App& app) {
  struct Opts {
    std::string to;
    bool json = false;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand("ls", "List the cargos loaded on a node and the variant each runs, its memory regions, and the node's architecture");
  cmd->add_option("--to", o->to, "The node: HOST:PORT (UCX on a loopback address, TLS to any other), tls://HOST:PORT or ucx://HOST:PORT")->required()->type_name("HOST:PORT");
  add_connect_options(*cmd);
  cmd->add_flag("--json", o->json, "Print JSON, with the node's statistics");
  cmd->footer(exit_codes_help({kExitOk, kExitUsage, kExitUnreachable, kExitDenied}));
  return [o] {
    set_json_output(o->json);
    auto c = connect_node(o->to);
    if (!c.ok()) return report(c.error());
    auto list = (*c)->list();
    if (!list.ok()) return report(list.error());
    auto stats = (*c)->stats();
    if (!stats.ok()) return report(stats.error());
    if (o->json) {
      nlohmann::json j = {{"node", o->to}, {"node_id", (*c)->node().node_id}, {"triple", list->triple}, {"arch", arch_of(list->triple)},
                          {"cpu", list->cpu}, {"prefer", list->prefer}, {"cargos", nlohmann::json::array()},
                          {"regions", nlohmann::json::array()}, {"stats", nlohmann::json::object()}};
      for (const auto& r : list->regions) j["regions"].push_back({{"name", r.name}, {"length", r.length}});
      for (const auto& l : list->cargos)
        j["cargos"].push_back({{"digest", to_hex(l.digest)}, {"name", l.name}, {"version", l.version},
                               {"variant", l.variant}, {"variants", l.variants}, {"entries", l.entries},
                               {"invocations", l.invocations}});
      for (const auto& s : *stats) j["stats"][s.name] = s.value;
      j["ok"] = true;
      print_json(j);
      return 0;
    }
    std::printf("node %s: %s (%s), JIT for cpu %s; runs %s\n\n", o->to.c_str(), arch_of(list->triple).c_str(), list->triple.c_str(),
                list->cpu.c_str(), list->prefer == "bitcode" ? "bitcode first" : "native objects first");
    std::printf("%-16s %-20s %-10s %-18s %12s  %s\n", "digest", "name", "version", "running", "invocations", "entries");
    for (const auto& l : list->cargos) {
      std::string entries;
      for (const auto& e : l.entries) entries += (entries.empty() ? "" : ",") + e;
      std::printf("%-16s %-20s %-10s %-18s %12llu  %s\n", to_hex(l.digest).substr(0, 16).c_str(), l.name.c_str(),
                  l.version.c_str(), l.variant.c_str(), (unsigned long long)l.invocations, entries.c_str());
    }
    if (list->cargos.empty()) std::printf("(nothing loaded)\n");
    if (!list->regions.empty()) {
      std::printf("\n%-24s %16s\n", "region", "bytes");
      for (const auto& r : list->regions) std::printf("%-24s %16llu\n", r.name.c_str(), (unsigned long long)r.length);
    }
    return 0;
  };
}

}  // namespace xcargo::cli
