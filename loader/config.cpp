// xcargo-loader's settings: the one table that makes both its flags and its loader.yaml keys,
// and loader.yaml parsing with yaml-cpp, with the file and key named in every error.
#include "config.h"

#include "xcargo/file.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <cstdlib>

namespace xcargo::loader {

namespace {

constexpr uint64_t kMaxConfigSize = 1 << 20;

Error must_be(const std::string& what) { return Error(Errc::invalid_argument, "must be " + what); }

template <typename T>
Status number(const std::string& text, T& out, T min, T max, const std::string& what) {
  T v{};
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < min || v > max) return must_be(what);
  out = v;
  return {};
}

Status size(const std::string& text, uint64_t& out, const char* zero_means = nullptr) {
  uint64_t v = 0;
  if (!parse_size(text, v)) return must_be(std::string("a size in bytes or with K, M, G (e.g. 64M)") + (zero_means ? zero_means : ""));
  out = v;
  return {};
}

// A double as text that reads back as the same double.
std::string exact(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.17g", v);
  return b;
}

Status flag(std::string text, bool& out) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char ch) { return char(std::tolower(ch)); });
  if (text == "true" || text == "yes" || text == "on") return out = true, Status();
  if (text == "false" || text == "no" || text == "off") return out = false, Status();
  return must_be("true or false");
}

using Shown = std::vector<std::string>;
// Each setting's apply, then its show (as Setting declares them).
#define SHOW(expr) [](const LoaderConfig& c) { return Shown{expr}; }
#define TEXT(field) [](LoaderConfig& c, const std::string& t) -> Status { c.field = t; return {}; }, SHOW(c.field)
#define SWITCH(field) \
  [](LoaderConfig& c, const std::string& t) -> Status { return flag(t, c.field); }, SHOW(c.field ? "true" : "false")
#define SIZE(field) [](LoaderConfig& c, const std::string& t) -> Status { return size(t, c.field); }, SHOW(std::to_string(c.field))

}  // namespace

bool parse_size(std::string text, uint64_t& out) {
  if (text.empty()) return false;
  uint64_t mult = 1;
  switch (text.back()) {
    case 'K': case 'k': mult = 1ull << 10; break;
    case 'M': case 'm': mult = 1ull << 20; break;
    case 'G': case 'g': mult = 1ull << 30; break;
    default: break;
  }
  if (mult != 1) text.pop_back();
  uint64_t n = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || end != text.data() + text.size() || n > (1ull << 46) / mult) return false;
  out = n * mult;
  return true;
}

namespace {

Status apply_prefer(LoaderConfig& c, const std::string& t) {
  if (t != "native" && t != "bitcode") return must_be("native or bitcode");
  c.prefer = t;
  return {};
}

Status apply_tenants(LoaderConfig& c, const std::string& t) {
  if (t != "per-key" && t != "single") return must_be("per-key or single");
  c.tenants = t;
  return {};
}

Status apply_tenant_users(LoaderConfig& c, const std::string& t) {
  if (t != "dynamic" && t != "shared") return must_be("dynamic or shared");
  c.tenant_users = t;
  return {};
}

}  // namespace

const std::vector<Setting>& settings() {
  static const std::vector<Setting> table = {
      {"listen", "HOST:PORT", "The loader's name on this host, HOST:PORT or HOST for port 7400 (port 0: any free port): its "
                              "user's processes reach its UCX over shared memory through the same-host door of that name "
                              "(the loader holds the port; UCX opens none). With trusted-network, UCX listens there",
       TEXT(listen)},
      {"tls-listen", "HOST:PORT", "Also serve clients and nodes over TLS 1.3 at HOST:PORT (port 0: any free port; the ready "
                                  "file's second line says which): every peer proves its key before any of its bytes is "
                                  "parsed, and all traffic is encrypted (format-spec/wire-protocol.md 2.3)", TEXT(tls_listen)},
      {"trust", "PATH", "Trusted signers: a .pub file or a directory of them", TEXT(trust)},
      {"clients", "PATH", "Authorized clients: a directory of their .pub files, or a file of "
                          "'[verbs=push,run,ls,read,forward] KEY [NAME]' lines (loader/SECURITY.md)", TEXT(clients)},
      {"allow-anyone", nullptr, "Serve every client that can reach the port, unauthenticated (instead of clients)",
       SWITCH(allow_anyone)},
      {"tenants", "per-key|single", "per-key: each client key, or each group of keys with the same tenant= in the clients "
                                    "file, gets workers of its own from its first connection (its own memory, cargos, "
                                    "regions and cache; loader/README.md, \"Tenants\"); single: one set of workers for all",
       apply_tenants, SHOW(c.tenants)},
      {"tenant-users", "dynamic|shared", "With tenants per-key, started as root: dynamic runs each tenant's workers under a "
                                         "uid and gid of its own (61184-65519, as systemd's DynamicUser), so no tenant's "
                                         "kernel can reach another's processes or System V memory; the loader then has no "
                                         "same-host door (clients use tls-listen). shared: the loader's user (or --user) for all",
       apply_tenant_users, SHOW(c.tenant_users)},
      {"node-key", "KEY", "This node's private key, which signs its hellos (default: a new one at each start). Mode 0600; "
                          "if encrypted, its passphrase comes from $XCARGO_PASSPHRASE or the terminal", TEXT(node_key)},
      {"cache", "DIR", "Directory for JIT output, kept across restarts", TEXT(cache)},
      {"ready-file", "PATH", "Write HOST:PORT here once listening ('-': standard output); removed when the loader stops",
       TEXT(ready_file)},
      {"prefer", "native|bitcode", "native objects first, or bitcode JIT-compiled for this CPU",
       apply_prefer, SHOW(c.prefer)},
      {"max-cargo", "SIZE", "Largest cargo accepted (bytes, or with K, M, G)", SIZE(max_cargo)},
      {"max-input", "SIZE", "Largest invocation input accepted (bytes, or with K, M, G)", SIZE(max_input)},
      {"max-reply", "SIZE", "Largest reply a kernel may send (bytes, or with K, M, G)", SIZE(max_reply)},
      {"timeout", "SECONDS", "Time limit per invocation, in seconds (fractions allowed; 0.001 to 86400)",
       [](LoaderConfig& c, const std::string& t) -> Status {
         char* end = nullptr;
         const double v = std::strtod(t.c_str(), &end);
         if (t.empty() || *end != '\0' || !(v >= 0.001 && v <= 86400)) return must_be("from 0.001 to 86400 seconds");
         c.timeout_s = v;
         return {};
       }, SHOW(exact(c.timeout_s))},
      {"executors", "N", "Requests that can run at once (1 to 256)",
       [](LoaderConfig& c, const std::string& t) { return number(t, c.executors, 1u, 256u, "from 1 to 256"); }, SHOW(std::to_string(c.executors))},
      {"inline-us", "MICROSECONDS", "Kernels that never took longer than this run on the thread that receives requests "
                                    "(0: never; at most 1000)",
       [](LoaderConfig& c, const std::string& t) { return number(t, c.inline_us, 0u, 1000u, "from 0 to 1000"); }, SHOW(std::to_string(c.inline_us))},
      {"spin-us", "MICROSECONDS", "After its last request, poll this long before sleeping (lower latency, more CPU; "
                                  "0 when nodes outnumber cores; at most 1000000)",
       [](LoaderConfig& c, const std::string& t) { return number(t, c.spin_us, 0u, 1000000u, "from 0 to 1000000"); }, SHOW(std::to_string(c.spin_us))},
      {"node-id", "ID", "This node's id (what xc_node_id() returns)",
       [](LoaderConfig& c, const std::string& t) { return number(t, c.node_id, 0u, 4294967295u, "a node id (0 or more)"); }, SHOW(std::to_string(c.node_id))},
      {"cluster", "FILE", "Cluster file: the nodes kernels can forward to (xc_forward); with node-id, this node's "
                          "address there is the default listen", TEXT(cluster)},
      {"max-hops", "N", "A computation forwarded more often than this is stopped (1 to 4000000000)",
       [](LoaderConfig& c, const std::string& t) { return number(t, c.max_hops, 1u, 4000000000u, "from 1 to 4000000000"); }, SHOW(std::to_string(c.max_hops))},
      {"regions", "NAME=SIZE", "Create a memory region for kernels (xc_region) and clients' reads, repeatable; "
                               "SIZE in bytes or with K, M, G (in loader.yaml: a mapping of names to sizes)",
       [](LoaderConfig& c, const std::string& t) -> Status {
         const auto eq = t.rfind('=');
         uint64_t n = 0;
         if (eq == std::string::npos || eq == 0 || !parse_size(t.substr(eq + 1), n) || n == 0)
           return must_be("NAME=SIZE with a size over 0, e.g. chase=64M");
         c.regions.push_back(t.substr(0, eq) + "=" + std::to_string(n));
         return {};
       }, [](const LoaderConfig& c) { return c.regions; }},
      {"max-memory", "SIZE", "Address-space limit of the process that runs kernels (bytes, or with K, M, G; 0: none; "
                             "default 8G)", SIZE(max_memory)},
      {"sandbox", nullptr, "Run kernels without the seccomp filters and file rules (to diagnose a problem; loader/SECURITY.md)",
       SWITCH(sandbox), true},
      {"standby", nullptr, "Keep no standby worker: a worker ended by a kernel's failure is replaced by one started "
                           "then (slower; saves a process)", SWITCH(standby), true},
      {"user", "NAME", "Started as root: the worker that runs kernels runs as this user (without it: as root without "
                       "capabilities)", TEXT(user)},
      {"one-sided-regions", nullptr, "Let clients read regions with one-sided UCX gets (default: through requests the "
                                     "loader bounds-checks; loader/SECURITY.md)", SWITCH(one_sided_regions)},
      {"trusted-network", nullptr, "State that every host able to reach this loader's UCX is trusted: UCX then listens "
                                   "at listen (any address) with its network transports (UCX trusts every peer; other "
                                   "hosts belong on tls-listen); needed for one-sided-regions over tcp or shared memory",
       SWITCH(trusted_network)},
      {"log", "FILE", "Write the log (every process's lines) to FILE instead of stderr, rotated to FILE.1 at log-max-size",
       TEXT(log)},
      {"log-every-run", nullptr, "Log a line for every kernel run (default: the first run of each cargo entry per "
                                 "connection, then one line a second summing the runs after it)", SWITCH(log_every_run)},
      {"log-max-size", "SIZE", "Rotate the log file before it passes this size (default 64M; at most twice this on disk)",
       SIZE(log_max_size)},
      {"log-format", "text|json", "text: one line per event; json: one JSON object per line (time, level, pid, message, "
                                  "and the fields the line names: cargo, entry, status, client, peer)",
       [](LoaderConfig& c, const std::string& t) -> Status {
         if (t != "text" && t != "json") return must_be("text or json");
         c.log_format = t;
         return {};
       }, SHOW(c.log_format)},
      {"metrics", "ADDR", "Serve the node's counters in Prometheus' text format (GET /metrics, no authentication) at "
                          "unix:/PATH or 127.0.0.1:PORT (loader/README.md, 'Metrics')", TEXT(metrics)},
      {"metrics-any-address", nullptr, "Let metrics listen on an address other hosts can reach (anyone who reaches it "
                                       "reads the counts)", SWITCH(metrics_any_address)},
  };
  return table;
}

std::string flag_of(const Setting& s) {
  if (std::string_view(s.name) == "regions") return "--region";
  return std::string(s.value || !s.on_by_default ? "--" : "--no-") + s.name;
}

Status read_config_file(const std::string& path, LoaderConfig& c) {
  auto text = read_file(path, kMaxConfigSize);
  if (!text.ok()) return Error(text.error().code(), path + ": " + text.error().message());
  return parse_config(std::string_view(reinterpret_cast<const char*>(text->data()), text->size()), path, c);
}

Status parse_config(std::string_view text, const std::string& path, LoaderConfig& c) {
  if (text.size() > kMaxConfigSize) return Error(Errc::limit, path + ": over " + std::to_string(kMaxConfigSize) + " bytes");
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return Error(Errc::invalid_argument, path + ": line " + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  if (root.IsNull()) return {};
  if (!root.IsMap()) return Error(Errc::invalid_argument, path + ": the configuration must be a mapping of settings");
  for (const auto& kv : root) {
    const std::string given = kv.first.IsScalar() ? kv.first.Scalar() : "";
    std::string key = given;
    std::replace(key.begin(), key.end(), '_', '-');
    auto it = std::find_if(settings().begin(), settings().end(), [&](const Setting& s) { return key == s.name; });
    if (it == settings().end()) {
      std::string names;
      for (const auto& s : settings()) names += (names.empty() ? "" : " ") + std::string(s.name);
      return Error(Errc::invalid_argument, path + ": unknown setting '" + given + "'").hint("settings: " + names);
    }
    auto fail = [&](const Error& e) {
      return Error(Errc::invalid_argument, path + ": line " + std::to_string(kv.first.Mark().line + 1) + ": '" + given +
                                               "' " + e.message());
    };
    const YAML::Node& v = kv.second;
    if (key == "regions") {
      if (!v.IsMap()) return fail(must_be("a mapping of region names to sizes, e.g. chase: 64M"));
      for (const auto& r : v) {
        if (!r.first.IsScalar() || !r.second.IsScalar()) return fail(must_be("a mapping of region names to sizes"));
        if (auto s = it->apply(c, r.first.Scalar() + "=" + r.second.Scalar()); !s.ok()) return fail(s.error());
      }
      continue;
    }
    if (!v.IsScalar()) return fail(must_be(it->value ? std::string("one value (") + it->value + ")" : "true or false"));
    if (auto s = it->apply(c, v.Scalar()); !s.ok()) return fail(s.error());
  }
  return {};
}

}  // namespace xcargo::loader
