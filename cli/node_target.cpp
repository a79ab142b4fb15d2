// Which loader a network verb talks to: connecting to nodes (with the verbs' common options),
// or finding the loader binary for local runs.
#include "node_target.h"

#include "xcargo/cluster.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "key_files.h"
#include "xcargo/trust.h"

namespace xcargo::cli {

std::string g_identity;
double g_connect_timeout_s = 5;

void add_connect_options(CLI::App& cmd) {
  cmd.add_option("--connect-timeout", g_connect_timeout_s,
                 "How long reaching a node may take, its handshake included, in seconds (a refused\n"
                 "connection fails at once)")
      ->type_name("SECONDS")->capture_default_str()->check(CLI::Range(0.001, 3600.0));
}

Result<std::unique_ptr<client::Connection>> connect_node(const std::string& host_port) {
  client::ConnectOptions o;
  o.identity = g_identity;
  o.identity_passphrase = passphrase_source();
  // Loaded at the first connection and kept: push to several nodes asks a passphrase once.
  static std::shared_ptr<const SigningKey> identity;
  if (!identity) {
    auto k = client::load_identity(o);
    XC_TRY(k);
    identity = *k;
  }
  o.identity_key = identity;
  o.connect_timeout_ms = std::max(1, int(g_connect_timeout_s * 1000 + 0.5));
  const auto start = std::chrono::steady_clock::now();
  auto c = client::connect(host_port, o);
  // Failed as its time ran out (waits end within a few ms of it): the timeout may be short.
  if (!c.ok() && c.error().code() == Errc::unreachable &&
      std::chrono::steady_clock::now() - start + std::chrono::milliseconds(20) >= std::chrono::milliseconds(o.connect_timeout_ms)) {
    char now[64];
    std::snprintf(now, sizeof now, "--connect-timeout SECONDS waits longer (it was %g s)", g_connect_timeout_s);
    return Error(c.error()).hint(now);
  }
  if (c.ok() && (*c)->node().auth == wire::AuthMode::optional)
    std::fprintf(stderr, "xcargo: warning: %s serves anyone who can reach it (allow-anyone): clients are not authenticated\n",
                 host_port.c_str());
  return c;
}

std::string local_loader_path() {
  if (const char* p = std::getenv("XCARGO_LOADER"); p && *p) return p;
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return (exe.parent_path() / "xcargo-loader").string();
}

Result<std::unique_ptr<client::Connection>> open_connection(const std::string& to, const std::string& trust,
                                                            const std::string& cache, const std::string& prefer,
                                                            unsigned timeout_s) {
  if (!to.empty()) {
    if (!trust.empty() || !cache.empty() || !prefer.empty())
      return Error(Errc::invalid_argument, "--trust, --cache and --prefer apply to local runs only")
          .hint("a node uses its own trust directory, cache and policy");
    return connect_node(to);
  }
  if (trust.empty())
    return Error(Errc::invalid_argument, "a local run needs --trust")
        .hint("pass --trust with the signer's .pub file, or --to HOST:PORT to run on a node");
  if (auto t = TrustStore::load(trust); !t.ok()) return t.take_error();  // clearer here than from the loader
  return client::spawn_local({local_loader_path(), trust, cache, prefer, timeout_s});
}

Result<bool> ensure_loaded(client::Connection& c, ByteView cargo, const Digest& digest) {
  auto has = c.has(digest);
  XC_TRY(has);
  if (*has) return false;
  if (const uint64_t max = c.node().max_cargo; max != 0 && cargo.size() > max)
    return Error(Errc::remote, "limit: the cargo is " + std::to_string(cargo.size()) + " bytes, over " + c.peer() +
                                   "'s limit of " + std::to_string(max) + " bytes")
        .hint("the node's max-cargo setting bounds the cargos it accepts");
  auto r = c.push(cargo);
  XC_TRY(r);
  if (r->status == wire::ReplyStatus::ok) return true;
  const Errc sent = wire::errc_of(r->error_kind);
  Error e(is_verification_failure(sent) ? sent : Errc::remote, c.peer() + " refused the cargo: " + r->message);
  if (sent == Errc::import) e.hint("kernels may call only the functions declared in <xcargo/kernel.h>");
  if (sent == Errc::untrusted && is_revoked_signers_message(r->message))
    for (std::string& h : revoked_signer_hints()) e.hint(std::move(h));
  else if (sent == Errc::untrusted)
    e.hint("the node's trust directory must hold the signer's .pub key");
  if (sent == Errc::revoked) e.hint("a rule of the node's trust directory refuses this cargo (format-spec/trust-directory.md)");
  return e;
}

Result<std::string> cluster_node_address(const std::string& cluster_file, uint32_t id) {
  auto c = read_cluster_file(cluster_file);
  XC_TRY(c);
  const ClusterNode* n = c->find(id);
  if (!n)
    return Error(Errc::invalid_argument, cluster_file + ": has no node " + std::to_string(id))
        .hint("its nodes are 0 to " + std::to_string(c->size() - 1));
  return n->address;
}

}  // namespace xcargo::cli
