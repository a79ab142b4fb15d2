// xcargo run: runs one entry of a cargo on a node (pushing it first if the node lacks it),
// or, with no --to, in a private local loader with the same checks.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

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

namespace {

// The run verb's options, as CLI11 fills them in.
struct RunOptions {
  std::string cargo, entry, to, trust, result = "hex", output, prefer, cache, cluster;
  uint32_t node = 0;
  std::vector<std::string> args, inputs;
  unsigned timeout = 10;
  bool json = false, log = false;
  uint64_t repeat = 1;
  unsigned inflight = 1;
  const CLI::Option* timeout_option = nullptr;  // --timeout: count() > 0 when it was given
};

// The run verb's --help footer: the layout of the kernel's input, then its exit codes.
std::string run_footer() {
  return "The kernel's input: the --arg values in the order given, then each --input's bytes.\n"
         "  i32 u32 f32: 4 bytes; i64 u64 f64: 8 bytes; little-endian, no padding before them.\n"
         "  str:TEXT: the text's bytes, no length, no terminator.\n"
         "  T[]:FILE: zero bytes up to the next multiple of 8 of the input, the element count as a u64,\n"
         "  then FILE's bytes; FILE's size must be a whole number of T (u8 1, i32 u32 f32 4, i64 u64 f64 8).\n"
         "  --input FILE: its bytes as they are, no length, no padding.\n"
         "  A C kernel reads them in the same order with xc_in_* of <xcargo/kernel.h>.\n" +
         exit_codes_help({kExitOk, kExitVerifyFailed, kExitUsage, kExitRemoteFailed, kExitUnreachable, kExitDenied});
}

// Adds the `run` subcommand to app, its options filling o (which must outlive the parse).
void declare_run_options(CLI::App& app, RunOptions& o) {
  CLI::App* cmd = app.add_subcommand("run", "Run an entry of a cargo on a node, or locally");
  cmd->add_option("cargo", o.cargo, "The cargo")->required()->type_name("CARGO");
  cmd->add_option("--entry", o.entry, "Entry point to run")->required()->type_name("NAME");
  cmd->add_option("--to", o.to, "The node to run on: HOST:PORT (UCX on a loopback address, TLS to any other), tls://HOST:PORT or ucx://HOST:PORT; without it, a private local loader runs the cargo")->type_name("HOST:PORT");
  auto* cluster = cmd->add_option("--cluster", o.cluster, "A cluster file: run on the node --node names there")
                     ->type_name("FILE");
  cmd->add_option("--node", o.node, "With --cluster: the id of the node to run on")->needs(cluster)->capture_default_str();
  cluster->excludes("--to");
  add_connect_options(*cmd);
  cmd->add_option("--trust", o.trust, "Local runs: the keys to trust (a .pub file or a directory)")->type_name("PATH");
  cmd->add_option("--arg", o.args, "Input value, repeatable, in order: TYPE:VALUE (i32 i64 u32 u64 f32 f64 str),\n"
                                   "e.g. --arg i64:2, or an array from a file, TYPE[]:FILE (u8[] i32[] i64[] u32[]\n"
                                   "u64[] f32[] f64[]), e.g. --arg f32[]:a.f32; layout below")
      ->type_name("TYPE:VALUE")->allow_extra_args(false);
  cmd->add_option("--input", o.inputs, "Append this file's bytes to the input, after the --arg values; repeatable\n"
                                       "('-': standard input)")
      ->type_name("FILE")->allow_extra_args(false);
  cmd->add_option("--result", o.result, "Decode the reply as i32 i64 u32 u64 f32 f64 (one value or several), the same\n"
                                        "with [] (an array: --json gives a JSON array), u8[], str or hex")
      ->capture_default_str()->type_name("TYPE")->check(CLI::Validator(
          [](std::string& t) { return is_result_type(t) ? std::string() : "'" + t + "' is not a --result type"; },
          "{i32,i64,u32,u64,f32,f64,str,hex,i32[],i64[],u32[],u64[],f32[],f64[],u8[]}"));
  cmd->add_option("--output", o.output, "Write the raw reply bytes to this file instead of printing the decoded result ('-': standard output)")->type_name("FILE");
  cmd->add_flag("--json", o.json, "Print the result as JSON");
  cmd->add_flag("--log", o.log, "Print the kernel's xc_log lines on standard error, \"ENTRY: LINE\" (with --json: in\n"
                                "\"log\"); a node returns the first 16, each cut to 200 bytes");
  o.timeout_option = cmd->add_option("--timeout", o.timeout,
                                     "Time limit of each invocation's kernel, in seconds (a node stops it past\n"
                                     "that; without it, a node's own limit applies, and none is ever above it)")
                         ->capture_default_str()->check(CLI::Range(1u, 4000000u));
  cmd->add_option("--prefer", o.prefer, "Local runs: native objects or bitcode first")->check(CLI::IsMember({"native", "bitcode"}));
  cmd->add_option("--cache", o.cache, "Local runs: JIT cache directory")->type_name("DIR");
  cmd->add_option("--repeat", o.repeat, "Run it N times (one push); every run must succeed. The last reply is printed, "
                                        "and how many runs a second were made")
      ->type_name("N")->check(CLI::Range(uint64_t(1), uint64_t(1) << 40));
  cmd->add_option("--inflight", o.inflight, "With --repeat: keep up to K runs in flight on the connection at once "
                                            "(local runs: one at a time)")
      ->type_name("K")->check(CLI::Range(1u, 128u))->capture_default_str();
  cmd->footer(run_footer());
}

// With --cluster, sets o.to to the address of the node --node names in the cluster file.
Status resolve_cluster_node(RunOptions& o) {
  if (o.cluster.empty()) return {};
  auto address = cluster_node_address(o.cluster, o.node);
  if (!address.ok()) return address.take_error();
  o.to = *address;
  return {};
}

// Errc::invalid_argument when standard input ('-') is named more than once, across the
// cargo, the --input files and the TYPE[]:- --arg values.
Status check_stdin_uses(const RunOptions& o) {
  // Standard input holds one file: a second '-' would read nothing.
  size_t stdin_uses = std::count(o.inputs.begin(), o.inputs.end(), "-") + (o.cargo == "-");
  for (const auto& a : o.args) stdin_uses += a.size() > 4 && a.ends_with("[]:-");
  if (stdin_uses > 1)
    return Error(Errc::invalid_argument, "standard input ('-') is named " + std::to_string(stdin_uses) + " times")
        .hint("it can be read once; give the other inputs as files");
  return {};
}

// The parts of the kernel's input: the packed --arg values and the opened --input files.
struct RunInput {
  Bytes args;
  std::vector<FileBytes> files;  // mapped, not copied: one alone goes to the node as it is
  uint64_t size = 0;             // the whole input's size, in bytes
};

// Packs the --arg values and opens the --input files into in; returns 0, or the exit code
// of the error it reported (report() never returns 0).
int read_input(const RunOptions& o, RunInput& in) {
  for (const auto& a : o.args)
    if (auto s = pack_arg(a, in.args); !s.ok()) return report(s.error());
  in.size = in.args.size();
  for (const auto& name : o.inputs) {
    auto f = FileBytes::open(name, UINT64_MAX);
    if (!f.ok()) return report(f.error(), name);
    in.size += f->size();
    in.files.push_back(std::move(*f));
  }
  return 0;
}

// Errc::remote when the input is over the node's max-input limit (0: no limit).
Status check_input_limit(const client::Connection& c, uint64_t input_size) {
  // Over the node's limit: said here, naming both sizes, instead of sent and refused.
  if (const uint64_t max = c.node().max_input; max != 0 && input_size > max)
    return Error(Errc::remote, "limit: the input is " + std::to_string(input_size) + " bytes, over " + c.peer() +
                                   "'s limit of " + std::to_string(max) + " bytes")
        .hint("the node's max-input setting bounds what one invocation may carry")
        .hint("data that large is better kept on the node, in a region (xc_region), than sent with each run");
  return {};
}

// The kernel's whole input, valid while in lives: the --arg values followed by the files'
// bytes, gathered in in.args; a single file with no --arg is used in place, uncopied.
ByteView join_input(RunInput& in) {
  ByteView input = in.args;
  if (in.files.size() == 1 && in.args.empty()) {
    input = in.files[0].bytes();
  } else if (!in.files.empty()) {
    in.args.reserve(in.size);
    for (const FileBytes& f : in.files) in.args.insert(in.args.end(), f.bytes().begin(), f.bytes().end());
    input = in.args;
  }
  return input;
}

// What the invocations gave: the reply to report (always set), and with --repeat how many
// runs failed, the first failed one's index, and the seconds they took.
struct Runs {
  std::optional<Result<client::InvokeReply>> reply;
  uint64_t failures = 0, first_failure = 0;
  double seconds = 0;
};

// Invokes the entry once, or --repeat times pipelined (up to --inflight at once); with
// --repeat, the reply kept is the first failure's, else the last one.
Runs invoke_entry(const RunOptions& o, client::Connection& c, const Digest& digest, ByteView input) {
  Runs runs;
  if (o.repeat == 1) {
    // Ctrl-C on a node's run cancels it there (the signal handler returns while this holds
    // on; a second signal ends xcargo at once): the invoke sends `cancel` and returns the
    // node's answer.
    const bool remote = !o.to.empty();
    if (remote) hold_cleanup();
    runs.reply = c.invoke(digest, o.entry, input);
    if (remote) release_cleanup();
  } else {  // pipelined: the first failure is the reply reported, else the last reply
    const client::Invocation call{digest, o.entry, input};
    const auto t0 = std::chrono::steady_clock::now();
    auto s = c.invoke_pipelined(o.repeat, [&](size_t) { return call; }, o.inflight,
                                [&](size_t i, Result<client::InvokeReply>& x) {
                                  if (!x.ok() || x->result.status != wire::ReplyStatus::ok) {
                                    if (runs.failures++ == 0) runs.first_failure = i, runs.reply = std::move(x);
                                  } else if (runs.failures == 0) {
                                    if (runs.reply) std::swap(*runs.reply, x);  // x's buffers take the next reply
                                    else runs.reply = std::move(x);
                                  }
                                });
    runs.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!s.ok() && runs.failures == 0) runs.reply = s.take_error();
  }
  return runs;
}

// How the outcome of a reply is judged: failed holds the error to report, if any; value is
// the reply decoded as --result, and json_value the same for --json (when not hex).
struct Outcome {
  std::optional<Error> failed;
  Result<std::string> value = std::string();
  Result<nlohmann::json> json_value = nlohmann::json();
};

// The outcome: the node's status, then whether the reply decodes as --result.
Outcome judge_reply(const RunOptions& o, const client::Connection& c, const client::InvokeReply& r, const Runs& runs) {
  const std::string repeated = o.repeat == 1 ? ""
                               : runs.failures ? " (run " + std::to_string(runs.first_failure + 1) + " of " + std::to_string(o.repeat) +
                                                     "; " + std::to_string(runs.failures) + " failed)"
                                               : "";
  const wire::ResultMsg& res = r.result;
  Outcome out;
  if (res.status != wire::ReplyStatus::ok) {
    Error e(Errc::remote, o.entry + " on " + c.peer() + " failed" + repeated + ": " + wire::status_name(res.status) +
                              (res.message.empty() ? "" : ": " + res.message));
    if (res.status == wire::ReplyStatus::no_entry) e.hint("'xcargo inspect " + o.cargo + "' lists the entries");
    if (res.status == wire::ReplyStatus::timeout && !o.to.empty() && o.timeout_option->count() == 0)
      e.hint("the node's own time limit applied; --timeout SECONDS sets a shorter one for a run");
    out.failed = std::move(e);
  } else if (out.value = decode_result(o.result, r.output); !out.value.ok()) {
    out.failed = out.value.error();
  } else if (o.json && o.result != "hex") {
    out.json_value = decode_result_json(o.result, r.output);
  }
  return out;
}

// Prints the verb's --json object: the reply, the outcome, and with --log and --repeat their parts.
void print_run_json(const RunOptions& o, const client::Connection& c, const client::InvokeReply& r, bool pushed,
                    const Runs& runs, const Outcome& out) {
  const wire::ResultMsg& res = r.result;
  nlohmann::json j = {{"ok", !out.failed}, {"status", wire::status_name(res.status)},
                      {"node", c.peer()}, {"entry", o.entry}, {"variant", res.variant},
                      {"kernel_return", res.kernel_return}, {"pushed", pushed}, {"output_hex", to_hex(r.output)},
                      {"output_size", r.output.size()}, {"ended_on_node", res.node_id}, {"hops", res.hops},
                      {"kernel_us", double(res.kernel_ns) / 1000}};
  if (!res.message.empty()) j["message"] = res.message;
  if (o.log) {
    j["log"] = res.log;
    j["log_dropped"] = res.log_dropped;
  }
  if (o.repeat > 1) {
    j["runs"] = o.repeat;
    j["failed_runs"] = runs.failures;
    j["inflight"] = o.inflight;
    j["seconds"] = runs.seconds;
    j["runs_per_second"] = runs.seconds > 0 ? double(o.repeat) / runs.seconds : 0.0;
  }
  if (out.failed) {
    j["error"] = error_json(*out.failed);
    j["exit_code"] = exit_code_for(out.failed->code());
  } else if (o.result != "hex") {
    j["value"] = out.json_value.ok() ? *out.json_value : nlohmann::json(*out.value);
  }
  print_json(j);
}

// Prints the kernel's xc_log lines on stderr, "ENTRY: LINE", then how many the node dropped.
void print_kernel_log(const std::string& entry, const wire::ResultMsg& res) {
  for (const std::string& line : res.log) std::fprintf(stderr, "%s: %s\n", entry.c_str(), for_terminal(line).c_str());
  if (res.log_dropped)
    std::fprintf(stderr, "%s: (%u more lines: in the node's log)\n", entry.c_str(), unsigned(res.log_dropped));
}

// Prints a successful run as text: the decoded value on stdout (unless --output), then notes
// on stderr of where it ran and, with --repeat, the rate.
void print_run_text(const RunOptions& o, const client::Connection& c, const wire::ResultMsg& res, bool pushed,
                    const Runs& runs, const std::string& value) {
  if (o.output.empty()) std::printf("%s\n", value.c_str());  // with --output, the file (or '-') has the reply
  const std::string ended = res.hops ? ", forwarded " + std::to_string(res.hops) + (res.hops == 1 ? " time" : " times") +
                                           ", ended on node " + std::to_string(res.node_id)
                                     : "";
  note(o.entry + " ran on " + c.peer() + " (variant " + res.variant + (pushed ? ", pushed first" : "") + ended + ")");
  if (o.repeat > 1) {
    char rate[160];
    std::snprintf(rate, sizeof rate, "%llu runs in %.3f s: %.0f runs a second, up to %u in flight",
                  static_cast<unsigned long long>(o.repeat), runs.seconds,
                  runs.seconds > 0 ? double(o.repeat) / runs.seconds : 0.0, c.pipelines() ? o.inflight : 1u);
    note(rate);
  }
}

// Writes --output, judges the reply and prints it as --json, --log and text ask; returns the
// exit code: 0 when the run succeeded and its reply decoded.
int finish_run(const RunOptions& o, const client::Connection& c, bool pushed, const Runs& runs) {
  const client::InvokeReply& r = **runs.reply;
  const wire::ResultMsg& res = r.result;
  if (!o.output.empty() && res.status == wire::ReplyStatus::ok)
    if (auto s = write_file(o.output, r.output); !s.ok()) return report(s.error(), o.output);
  const Outcome out = judge_reply(o, c, r, runs);
  if (o.json) print_run_json(o, c, r, pushed, runs, out);
  if (o.log && !o.json) print_kernel_log(o.entry, res);  // the kernel's words first, as a job's stderr precedes its end
  if (out.failed) return report(*out.failed, o.cargo);
  if (!o.json) print_run_text(o, c, res, pushed, runs, *out.value);
  return 0;
}

// The run verb's body: each check in turn (the first failure is reported and gives the exit
// code), then the invocation and its outcome.
int run_entry(RunOptions& o) {
  set_json_output(o.json);
  if (auto s = resolve_cluster_node(o); !s.ok()) return report(s.error());
  if (auto s = check_stdin_uses(o); !s.ok()) return report(s.error());
  RunInput in;
  if (int code = read_input(o, in)) return code;
  auto bytes = read_cargo_file(o.cargo);
  if (!bytes.ok()) return report(bytes.error(), o.cargo);
  // Checked here first (structure and every digest, not trust): a damaged file is reported
  // as such, and never mistaken for the intact cargo a node may already hold.
  auto local = load_cargo(*bytes, nullptr);
  if (!local.ok()) return report(local.error(), o.cargo);
  const Container* container = &local->container();

  auto conn = open_connection(o.to, o.trust, o.cache, o.prefer, o.timeout);
  if (!conn.ok()) return report(conn.error());
  client::Connection& c = **conn;
  if (o.timeout_option->count() > 0) c.set_kernel_timeout(std::chrono::seconds(o.timeout));
  c.set_kernel_log(o.log);

  if (auto s = check_input_limit(c, in.size); !s.ok())
    return report(s.error(), o.inputs.size() == 1 ? o.inputs[0] : o.cargo);
  const ByteView input = join_input(in);
  auto loaded = ensure_loaded(c, *bytes, container->digest);
  if (!loaded.ok()) return report(loaded.error(), o.cargo);
  const bool pushed = *loaded;
  const Runs runs = invoke_entry(o, c, container->digest, input);
  if (!runs.reply->ok()) return report(runs.reply->error(), o.cargo);
  return finish_run(o, c, pushed, runs);
}

}  // namespace

// Registers `run`; the Runner it returns runs the entry with the options as parsed.
Runner add_run(CLI::App& app) {
  auto o = std::make_shared<RunOptions>();
  declare_run_options(app, *o);
  return [o] { return run_entry(*o); };
}

}  // namespace xcargo::cli
