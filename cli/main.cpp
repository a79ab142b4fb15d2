// xcargo: the command-line tool. Parses the verb and its options, runs it, maps errors to
// the exit codes of exit_codes.h.
#include <openssl/crypto.h>
#include <signal.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <map>
#include <string_view>
#include <vector>

#include "exit_codes.h"
#include "key_files.h"
#include "node_target.h"
#include "report.h"
#include "verbs.h"
#include "xcargo/interrupt.h"
#include "xcargo/version.h"

namespace {

// Ctrl-C, SIGTERM, SIGHUP: child processes (compilers, a local loader) are killed at once;
// then the verb exits, unless it holds on (scratch files it removes as it unwinds, a node's
// run it cancels); a second signal exits at once.
void on_interrupt(int sig) {
  const bool again = xcargo::interrupted() != 0;  // a second Ctrl-C does not wait for the unwinding
  xcargo::interrupt_now(sig);
  if (again || !xcargo::cleanup_held()) ::_exit(128 + sig);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace xcargo::cli;
  struct sigaction sa {};
  sa.sa_handler = on_interrupt;  // no SA_RESTART: waits return, see the signal, and unwind
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) ::sigaction(sig, &sa, nullptr);
  // xcargo needs no OpenSSL configuration (it uses only the built-in default provider);
  // skipping openssl.cnf saves ~0.3 ms of every run.
  OPENSSL_init_crypto(OPENSSL_INIT_NO_LOAD_CONFIG, nullptr);
  CLI::App app{"xcargo: build, sign and check multi-architecture code containers (cargos), and run their kernels on remote nodes or locally"};
  app.name("xcargo");
  app.set_version_flag("--version", std::string("xcargo ") + XCARGO_VERSION_STRING,
                       "Print the version and exit; with -v also where xcargo finds its kernel headers, clang and the loader");
  app.require_subcommand(1);
  app.fallthrough();  // --identity also after the verb
  app.add_option("--identity", g_identity, "Private key that proves who you are to nodes that authenticate clients "
                 "(default: $XCARGO_IDENTITY, else ~/.config/xcargo/identity)")->type_name("KEY");
  app.add_option("--passphrase-env", g_passphrase_env, "Environment variable holding the passphrase of encrypted keys "
                 "(--key, --identity, keygen --encrypt); default: $XCARGO_PASSPHRASE, else asked on the terminal")
      ->type_name("VAR");
  app.footer("Run 'xcargo VERB --help' (or 'xcargo help VERB') for a verb's options.\n\n" +
             exit_codes_help({kExitOk, kExitVerifyFailed, kExitUsage, kExitRemoteFailed, kExitUnreachable, kExitDenied}));
  std::map<CLI::App*, Runner> runners;
  for (const Verb& v : kVerbs) {
    CLI::App* before = nullptr;
    Runner r = v.add(app);
    for (CLI::App* sub : app.get_subcommands({}))
      if (sub->get_name() == v.name) before = sub;
    runners[before] = std::move(r);
  }
  // `xcargo help [VERB]` is `xcargo [VERB] --help`.
  std::vector<char*> args(argv, argv + argc);
  static char help_flag[] = "--help";
  if (argc >= 2 && std::string_view(argv[1]) == "help") {
    args.erase(args.begin() + 1);
    args.push_back(help_flag);
    argc = int(args.size());
    argv = args.data();
  }
  // --version anywhere before "--" (after a verb too), with -v/--verbose for the details.
  bool version = false, verbose = false;
  for (int i = 1; i < argc && std::string_view(argv[i]) != "--"; ++i) {
    version = version || std::string_view(argv[i]) == "--version";
    verbose = verbose || std::string_view(argv[i]) == "-v" || std::string_view(argv[i]) == "--verbose";
  }
  if (version) return print_version(verbose);
  // --json: a usage error is JSON too.
  for (int i = 1; i < argc && std::string_view(argv[i]) != "--"; ++i)
    if (std::string_view(argv[i]) == "--json") set_json_output(true);
  if (argc > 1 && argv[1][0] != '-') {
    bool known = false;
    std::string verbs;
    for (const Verb& v : kVerbs) {
      known = known || v.name == std::string(argv[1]);
      verbs += (verbs.empty() ? "" : ", ") + std::string(v.name);
    }
    if (!known)
      return report(xcargo::Error(xcargo::Errc::invalid_argument, "unknown verb '" + std::string(argv[1]) + "'")
                        .hint("verbs are " + verbs + "; see 'xcargo --help'"));
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::string what = e.what();
    if (!what.empty()) what[0] = char(std::tolower(static_cast<unsigned char>(what[0])));
    std::string verb;
    for (CLI::App* sub : app.get_subcommands()) verb = sub->get_name();
    return report(xcargo::Error(xcargo::Errc::invalid_argument, what).hint("run 'xcargo " + (verb.empty() ? "" : verb + " ") + "--help' for usage"));
  }
  for (CLI::App* sub : app.get_subcommands()) {
    const int code = runners.at(sub)();
    if (int sig = xcargo::interrupted()) return 128 + sig;
    return code;
  }
  return kExitUsage;
}
