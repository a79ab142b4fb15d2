// xcargo-loader's settings: defaults, then loader.yaml (--config), then command-line flags.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "xcargo/cluster.h"
#include "xcargo/error.h"

namespace xcargo::loader {

struct LoaderConfig {
  std::string listen;      // HOST:PORT; port 0 picks a free port
  std::string tls_listen;  // the TLS front door's HOST:PORT (empty: none)
  std::string trust;       // .pub file or directory of trusted signers
  std::string cache;       // JIT output cache directory
  std::string ready_file;  // receives HOST:PORT once listening
  std::string prefer = "native";
  uint64_t max_cargo = 256ull << 20;
  uint64_t max_input = 256ull << 20;
  uint64_t max_reply = 64ull << 20;
  double timeout_s = 10;    // per invocation, in seconds (fractions allowed)
  unsigned executors = 4;   // requests that can run at once
  unsigned spin_us = 1000;  // an idle loader polls this long before it sleeps
  unsigned inline_us = 20;  // quick kernels run on the receiving thread (0: never)
  uint32_t node_id = 0;
  std::string cluster;      // cluster file: the other nodes, for xc_forward
  uint32_t max_hops = 1000000;  // forwards a computation may take before it is stopped
  Cluster nodes;            // read from `cluster` at start (not a setting)
  int node_memory_fd = -1;  // the supervisor's node memory, which workers inherit (not a setting)
  int kept_cargos_fd = -1;  // the supervisor's kept cargos, which workers inherit (not a setting)
  std::vector<std::string> regions;  // NAME=SIZE: memory regions created at start
  bool sandbox = true;      // seccomp filters on the worker (loader/SECURITY.md)
  bool standby = true;      // a standby worker waits to replace the serving one (loader/README.md)
  bool one_sided_regions = false;  // clients may ucp_get regions (UCX RMA on; loader/SECURITY.md)
  bool trusted_network = false;    // required with one_sided_regions over software-emulated RMA
  bool log_every_run = false;      // a log line per run instead of RunLog's sums
  std::string clients;     // authorized client keys: a directory of .pub files or a key-list file
  bool allow_anyone = false;  // no client authentication (open, as before; loader/SECURITY.md)
  std::string tenant_users = "shared";  // dynamic: a uid of its own per tenant (root only; no same-host door)
  std::string tenants = "single";  // per-key: workers of its own for each tenant (tenancy.h); single: one set for all
  std::string node_key;    // this node's private key; empty: a new one at each start
  uint64_t max_memory = 8ull << 30;  // the worker's address space (RLIMIT_AS); 0: no limit
  std::string user;         // started as root: the worker runs as this user
  bool verbose = false;     // --exec only: log requests
  std::string log;          // --log FILE: the log goes here instead of stderr, rotated
  uint64_t log_max_size = 64ull << 20;  // FILE is rotated to FILE.1 before it passes this
  std::string log_format = "text";  // text or json (log.h, set_log_json)
  std::string metrics;      // unix:/PATH or HOST:PORT of the metrics endpoint (empty: none)
  bool metrics_any_address = false;  // metrics may listen on a non-loopback address
  int node_stats_fd = -1;   // the supervisor's counters, which workers inherit (not a setting)
};

// The one table of settings: each is a flag (--NAME) and a loader.yaml key (NAME, or with
// '_' for '-'), with the same units, suffixes and checks, because both go through apply.
// A switch (value == nullptr) is `NAME: true|false` in YAML and, as a flag, --no-NAME when
// it is on by default, --NAME when off. `regions` is a YAML mapping of names to sizes and
// the repeatable flag --region NAME=SIZE.
struct Setting {
  const char* name;
  const char* value;  // what --help shows for the flag's argument; nullptr: a switch
  const char* help;
  // Sets the value written as text (a flag's argument, a YAML scalar); the error says what
  // it must be, and the caller says where it came from.
  Status (*apply)(LoaderConfig& config, const std::string& text);
  // The value as texts that apply takes back to the same value (one, or none and more for
  // regions): how a worker started by exec gets its supervisor's settings.
  std::vector<std::string> (*show)(const LoaderConfig& config);
  bool on_by_default = false;  // switches: the flag is --no-NAME
};
const std::vector<Setting>& settings();
// The flag a setting has on the command line: --NAME, --no-NAME for a switch on by default,
// --region for regions.
std::string flag_of(const Setting& setting);
// SIZE in bytes or with a K, M or G suffix; false if it is not one, or over 2^46.
bool parse_size(std::string size, uint64_t& out);

// Reads a loader.yaml; keys are the settings' names with '-' or '_' (see loader.example.yaml).
// Unknown keys are errors, so that a misspelt setting is not silently ignored.
Status read_config_file(const std::string& path, LoaderConfig& config);
// The same for text already read; origin names it in messages.
Status parse_config(std::string_view text, const std::string& origin, LoaderConfig& config);

}  // namespace xcargo::loader
