// xcargo run: runs one entry of a cargo on a node (pushing it first if the node lacks it),
// or, with no --to, in a private local loader with the same checks.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>

#include <nlohmann/json.hpp>

#include "describe.h"
#include "exit_codes.h"
#include "node_target.h"
#include "report.h"
#include "values.h"
#include "verbs.h"
#include "xcargo/interrupt.h"
#include "xcargo/cargo.h"
#include "xcargo/client.h"
#include "xcargo/file.h"

namespace xcargo::cli {

Runner add_run(CLI::App& app) {
  struct Opts {
    std::string cargo, entry, to, trust, result = "hex", output, prefer, cache, cluster;
    uint32_t node = 0;
    std::vector<std::string> args, inputs;
    unsigned timeout = 10;
    bool json = false, log = false;
    uint64_t repeat = 1;
    unsigned inflight = 1;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand("run", "Run an entry of a cargo on a node, or locally");
  cmd->add_option("cargo", o->cargo, "The cargo")->required()->type_name("CARGO");
  cmd->add_option("--entry", o->entry, "Entry point to run")->required()->type_name("NAME");
  cmd->add_option("--to", o->to, "The node to run on: HOST:PORT (UCX on a loopback address, TLS to any other), tls://HOST:PORT or ucx://HOST:PORT; without it, a private local loader runs the cargo")->type_name("HOST:PORT");
  auto* cluster = cmd->add_option("--cluster", o->cluster, "A cluster file: run on the node --node names there")
                     ->type_name("FILE");
  cmd->add_option("--node", o->node, "With --cluster: the id of the node to run on")->needs(cluster)->capture_default_str();
  cluster->excludes("--to");
  add_connect_options(*cmd);
  cmd->add_option("--trust", o->trust, "Local runs: the keys to trust (a .pub file or a directory)")->type_name("PATH");
  cmd->add_option("--arg", o->args, "Input value, repeatable, in order: TYPE:VALUE (i32 i64 u32 u64 f32 f64 str),\n"
                                     "e.g. --arg i64:2, or an array from a file, TYPE[]:FILE (u8[] i32[] i64[] u32[]\n"
                                     "u64[] f32[] f64[]), e.g. --arg f32[]:a.f32; layout below")
      ->type_name("TYPE:VALUE")->allow_extra_args(false);
  cmd->add_option("--input", o->inputs, "Append this file's bytes to the input, after the --arg values; repeatable\n"
                                        "('-': standard input)")
      ->type_name("FILE")->allow_extra_args(false);
  cmd->add_option("--result", o->result, "Decode the reply as i32 i64 u32 u64 f32 f64 (one value or several), the same\n"
                                         "with [] (an array: --json gives a JSON array), u8[], str or hex")
      ->capture_default_str()->type_name("TYPE")->check(CLI::Validator(
          [](std::string& t) { return is_result_type(t) ? std::string() : "'" + t + "' is not a --result type"; },
          "{i32,i64,u32,u64,f32,f64,str,hex,i32[],i64[],u32[],u64[],f32[],f64[],u8[]}"));
  cmd->add_option("--output", o->output, "Write the raw reply bytes to this file instead of printing the decoded result ('-': standard output)")->type_name("FILE");
  cmd->add_flag("--json", o->json, "Print the result as JSON");
  cmd->add_flag("--log", o->log, "Print the kernel's xc_log lines on standard error, \"ENTRY: LINE\" (with --json: in\n"
                                  "\"log\"); a node returns the first 16, each cut to 200 bytes");
  auto* timeout = cmd->add_option("--timeout", o->timeout,
                                  "Time limit of each invocation's kernel, in seconds (a node stops it past\n"
                                  "that; without it, a node's own limit applies, and none is ever above it)")
                      ->capture_default_str()->check(CLI::Range(1u, 4000000u));
  cmd->add_option("--prefer", o->prefer, "Local runs: native objects or bitcode first")->check(CLI::IsMember({"native", "bitcode"}));
  cmd->add_option("--cache", o->cache, "Local runs: JIT cache directory")->type_name("DIR");
  cmd->add_option("--repeat", o->repeat, "Run it N times (one push); every run must succeed. The last reply is printed, "
                                         "and how many runs a second were made")
      ->type_name("N")->check(CLI::Range(uint64_t(1), uint64_t(1) << 40));
  cmd->add_option("--inflight", o->inflight, "With --repeat: keep up to K runs in flight on the connection at once "
                                             "(local runs: one at a time)")
      ->type_name("K")->check(CLI::Range(1u, 128u))->capture_default_str();
  cmd->footer("The kernel's input: the --arg values in the order given, then each --input's bytes.\n"
              "  i32 u32 f32: 4 bytes; i64 u64 f64: 8 bytes; little-endian, no padding before them.\n"
              "  str:TEXT: the text's bytes, no length, no terminator.\n"
              "  T[]:FILE: zero bytes up to the next multiple of 8 of the input, the element count as a u64,\n"
              "  then FILE's bytes; FILE's size must be a whole number of T (u8 1, i32 u32 f32 4, i64 u64 f64 8).\n"
              "  --input FILE: its bytes as they are, no length, no padding.\n"
              "  A C kernel reads them in the same order with xc_in_* of <xcargo/kernel.h>.\n" +
              exit_codes_help({kExitOk, kExitVerifyFailed, kExitUsage, kExitRemoteFailed, kExitUnreachable, kExitDenied}));
  return [o, timeout] {
    set_json_output(o->json);
    if (!o->cluster.empty()) {
      auto address = cluster_node_address(o->cluster, o->node);
      if (!address.ok()) return report(address.error());
      o->to = *address;
    }
    // Standard input holds one file: a second '-' would read nothing.
    size_t stdin_uses = std::count(o->inputs.begin(), o->inputs.end(), "-") + (o->cargo == "-");
    for (const auto& a : o->args) stdin_uses += a.size() > 4 && a.ends_with("[]:-");
    if (stdin_uses > 1)
      return report(Error(Errc::invalid_argument, "standard input ('-') is named " + std::to_string(stdin_uses) + " times")
                        .hint("it can be read once; give the other inputs as files"));
    Bytes args;
    for (const auto& a : o->args)
      if (auto s = pack_arg(a, args); !s.ok()) return report(s.error());
    std::vector<FileBytes> files;  // mapped, not copied: one alone goes to the node as it is
    uint64_t input_size = args.size();
    for (const auto& name : o->inputs) {
      auto f = FileBytes::open(name, UINT64_MAX);
      if (!f.ok()) return report(f.error(), name);
      input_size += f->size();
      files.push_back(std::move(*f));
    }
    auto bytes = read_cargo_file(o->cargo);
    if (!bytes.ok()) return report(bytes.error(), o->cargo);
    // Checked here first (structure and every digest, not trust): a damaged file is reported
    // as such, and never mistaken for the intact cargo a node may already hold.
    auto local = load_cargo(*bytes, nullptr);
    if (!local.ok()) return report(local.error(), o->cargo);
    const Container* container = &local->container();

    auto conn = open_connection(o->to, o->trust, o->cache, o->prefer, o->timeout);
    if (!conn.ok()) return report(conn.error());
    client::Connection& c = **conn;
    if (timeout->count() > 0) c.set_kernel_timeout(std::chrono::seconds(o->timeout));
    c.set_kernel_log(o->log);

    // Over the node's limit: said here, naming both sizes, instead of sent and refused.
    if (const uint64_t max = c.node().max_input; max != 0 && input_size > max)
      return report(Error(Errc::remote, "limit: the input is " + std::to_string(input_size) + " bytes, over " + c.peer() +
                                            "'s limit of " + std::to_string(max) + " bytes")
                        .hint("the node's max-input setting bounds what one invocation may carry")
                        .hint("data that large is better kept on the node, in a region (xc_region), than sent with each run"),
                    o->inputs.size() == 1 ? o->inputs[0] : o->cargo);
    ByteView input = args;
    if (files.size() == 1 && args.empty()) {
      input = files[0].bytes();
    } else if (!files.empty()) {
      args.reserve(input_size);
      for (const FileBytes& f : files) args.insert(args.end(), f.bytes().begin(), f.bytes().end());
      input = args;
    }
    auto loaded = ensure_loaded(c, *bytes, container->digest);
    if (!loaded.ok()) return report(loaded.error(), o->cargo);
    const bool pushed = *loaded;
    std::optional<Result<client::InvokeReply>> reply;
    uint64_t failures = 0, first_failure = 0;
    double seconds = 0;
    if (o->repeat == 1) {
      // Ctrl-C on a node's run cancels it there (the signal handler returns while this holds
      // on; a second signal ends xcargo at once): the invoke sends `cancel` and returns the
      // node's answer.
      const bool remote = !o->to.empty();
      if (remote) hold_cleanup();
      reply = c.invoke(container->digest, o->entry, input);
      if (remote) release_cleanup();
    } else {  // pipelined: the first failure is the reply reported, else the last reply
      const client::Invocation call{container->digest, o->entry, input};
      const auto t0 = std::chrono::steady_clock::now();
      auto s = c.invoke_pipelined(o->repeat, [&](size_t) { return call; }, o->inflight,
                                  [&](size_t i, Result<client::InvokeReply>& x) {
                                    if (!x.ok() || x->result.status != wire::ReplyStatus::ok) {
                                      if (failures++ == 0) first_failure = i, reply = std::move(x);
                                    } else if (failures == 0) {
                                      if (reply) std::swap(*reply, x);  // x's buffers take the next reply
                                      else reply = std::move(x);
                                    }
                                  });
      seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (!s.ok() && failures == 0) reply = s.take_error();
    }
    if (!reply->ok()) return report(reply->error(), o->cargo);
    client::InvokeReply* r = &**reply;
    const std::string repeated = o->repeat == 1 ? ""
                                 : failures ? " (run " + std::to_string(first_failure + 1) + " of " + std::to_string(o->repeat) +
                                                  "; " + std::to_string(failures) + " failed)"
                                            : "";
    const wire::ResultMsg& res = r->result;
    if (!o->output.empty() && res.status == wire::ReplyStatus::ok)
      if (auto s = write_file(o->output, r->output); !s.ok()) return report(s.error(), o->output);
    // The outcome: the node's status, then whether the reply decodes as --result.
    std::optional<Error> failed;
    Result<std::string> value = std::string();
    Result<nlohmann::json> json_value = nlohmann::json();
    if (res.status != wire::ReplyStatus::ok) {
      Error e(Errc::remote, o->entry + " on " + c.peer() + " failed" + repeated + ": " + wire::status_name(res.status) +
                                (res.message.empty() ? "" : ": " + res.message));
      if (res.status == wire::ReplyStatus::no_entry) e.hint("'xcargo inspect " + o->cargo + "' lists the entries");
      if (res.status == wire::ReplyStatus::timeout && !o->to.empty() && timeout->count() == 0)
        e.hint("the node's own time limit applied; --timeout SECONDS sets a shorter one for a run");
      failed = std::move(e);
    } else if (value = decode_result(o->result, r->output); !value.ok()) {
      failed = value.error();
    } else if (o->json && o->result != "hex") {
      json_value = decode_result_json(o->result, r->output);
    }
    if (o->json) {
      nlohmann::json j = {{"ok", !failed}, {"status", wire::status_name(res.status)},
                          {"node", c.peer()}, {"entry", o->entry}, {"variant", res.variant},
                          {"kernel_return", res.kernel_return}, {"pushed", pushed}, {"output_hex", to_hex(r->output)},
                          {"output_size", r->output.size()}, {"ended_on_node", res.node_id}, {"hops", res.hops},
                          {"kernel_us", double(res.kernel_ns) / 1000}};
      if (!res.message.empty()) j["message"] = res.message;
      if (o->log) {
        j["log"] = res.log;
        j["log_dropped"] = res.log_dropped;
      }
      if (o->repeat > 1) {
        j["runs"] = o->repeat;
        j["failed_runs"] = failures;
        j["inflight"] = o->inflight;
        j["seconds"] = seconds;
        j["runs_per_second"] = seconds > 0 ? double(o->repeat) / seconds : 0.0;
      }
      if (failed) {
        j["error"] = error_json(*failed);
        j["exit_code"] = exit_code_for(failed->code());
      } else if (o->result != "hex") {
        j["value"] = json_value.ok() ? *json_value : nlohmann::json(*value);
      }
      print_json(j);
    }
    if (o->log && !o->json) {  // the kernel's words first, as a job's stderr precedes its end
      for (const std::string& line : res.log) std::fprintf(stderr, "%s: %s\n", o->entry.c_str(), for_terminal(line).c_str());
      if (res.log_dropped)
        std::fprintf(stderr, "%s: (%u more lines: in the node's log)\n", o->entry.c_str(), unsigned(res.log_dropped));
    }
    if (failed) return report(*failed, o->cargo);
    if (!o->json) {
      if (o->output.empty()) std::printf("%s\n", value->c_str());  // with --output, the file (or '-') has the reply
      const std::string ended = res.hops ? ", forwarded " + std::to_string(res.hops) + (res.hops == 1 ? " time" : " times") +
                                               ", ended on node " + std::to_string(res.node_id)
                                         : "";
      note(o->entry + " ran on " + c.peer() + " (variant " + res.variant + (pushed ? ", pushed first" : "") + ended + ")");
      if (o->repeat > 1) {
        char rate[160];
        std::snprintf(rate, sizeof rate, "%llu runs in %.3f s: %.0f runs a second, up to %u in flight",
                      static_cast<unsigned long long>(o->repeat), seconds, seconds > 0 ? double(o->repeat) / seconds : 0.0,
                      c.pipelines() ? o->inflight : 1u);
        note(rate);
      }
    }
    return 0;
  };
}

}  // namespace xcargo::cli
