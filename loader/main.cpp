// xcargo-loader: runs verified cargos for clients, over UCX (--listen) or for one local
// client over stdin/stdout (--exec, what `xcargo run` without --to starts).
#include <CLI/CLI.hpp>
#include <openssl/crypto.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <filesystem>
#include <cstdio>
#include <cstring>
#include <optional>
#include <thread>

#include "server/auth_gate.h"
#include "config.h"
#include "exit_codes.h"
#include "engine/engine.h"
#include "server/handler.h"
#include "keys/key_service.h"
#include "keys/node_key.h"
#include "log.h"
#include "stats/metrics_server.h"
#include "stats/node_stats.h"
#include "engine/regions.h"
#include "compiler/service.h"
#include "sandbox/sandbox.h"
#include "port_hold.h"
#include "reload.h"
#include "door_keeper.h"
#include "supervisor.h"
#include "tenancy.h"
#include "tenants.h"
#include "tenant_users.h"
#include "tls_keeper.h"
#include "worker_start.h"
#include "timing.h"
#include "server/ucx_server.h"
#include "xcargo/cluster.h"
#include "xcargo/file.h"
#include "net/ucx.h"
#include "xcargo/version.h"

using namespace xcargo;
using namespace xcargo::loader;

namespace {

std::atomic<bool> g_stop{false};
void on_signal(int) { g_stop.store(true); }
// --exec serves the one client that started it: stopped, it has nothing to finish or keep,
// and a kernel still running would otherwise burn a core until its time limit.
void on_exec_signal(int sig) { ::_exit(128 + sig); }

int fail(const Error& e) {
  flush_log();
  std::fprintf(stderr, "xcargo-loader: error: %s\n", e.message().c_str());
  for (const auto& h : e.hints()) std::fprintf(stderr, "hint: %s\n", h.c_str());
  return exit_code::kCannotStart;
}

// A worker's failure: a line of the log (time stamped, naming its process), as every other
// line a worker writes, since its stderr is the loader's log.
int fail_in_log(const Error& e) {
  std::string line = "error: " + e.message();
  for (const auto& h : e.hints()) line += "; hint: " + h;
  log_line(line);
  flush_log();
  return exit_code::kCannotStart;
}

// One client on stdin/stdout, framed messages, until end of input.
int serve_stdio(Handler& handler) {
  const uint64_t max_data = std::max(handler.max_cargo(), handler.max_input());
  for (;;) {
    uint8_t head[wire::kFrameHeaderSize];
    if (read_exact(0, head, sizeof head) != ReadEnd::done) return exit_code::kOk;
    auto h = wire::decode_frame_head(ByteView(head, sizeof head), max_data);
    if (!h.ok()) {
      log_line("refused a frame: " + h.error().message());
      return exit_code::kStream;
    }
    Bytes frame(sizeof head + h->header_len + h->data_len);
    std::memcpy(frame.data(), head, sizeof head);
    if (read_exact(0, frame.data() + sizeof head, h->header_len + size_t(h->data_len)) != ReadEnd::done) return exit_code::kStream;
    auto f = wire::decode_frame(frame, max_data);
    Reply r = f.ok() ? handler.handle(f->type, f->header, f->data)
                     : Reply{wire::MsgType::result,
                             wire::encode(wire::ResultMsg{0, wire::ReplyStatus::bad_request, 0, 0, 0, 0, 0, "", f.error().message()}), {}};
    if (!write_all(1, wire::encode_frame(r.type, r.header, r.data)).ok()) return exit_code::kStream;
  }
}

// The engine as the settings describe it, trusting cfg.trust; log receives its lines.
// Bitcode variants are compiled by `compile` (the compile service, which owns the cache).
// open_regions false: node memory waits for Engine::open_regions (a standby worker). tiers:
// bitcode runs its quick tier until the server's leader has it replaced (EngineConfig::jit_tiers).
Result<std::unique_ptr<Engine>> make_engine(const LoaderConfig& cfg, const std::function<void(std::string_view)>& log,
                                            Compiler compile, bool open_regions = true, bool tiers = false) {
  auto store = TrustStore::load(cfg.trust);
  XC_TRY(store);
  EngineConfig ec;
  ec.node_memory_fd = cfg.node_memory_fd;
  ec.kept_cargos_fd = cfg.kept_cargos_fd;
  ec.compile = std::move(compile);
  ec.read_cache_dir = cfg.cache;
  ec.jit_tiers = tiers;
  ec.prefer = cfg.prefer == "bitcode" ? Prefer::bitcode : Prefer::native;
  ec.limits.max_cargo_size = std::min<uint64_t>(cfg.max_cargo, format::kMaxCargoSize);
  ec.max_reply = cfg.max_reply;
  ec.node_id = cfg.node_id;
  ec.node_count = std::max<uint32_t>(1, cfg.nodes.size());
  ec.max_forward_input = cfg.max_input;
  ec.quick_ns = uint64_t(cfg.inline_us) * 1000;
  ec.log = log;
  for (const std::string& spec : cfg.regions) {  // NAME=SIZE, checked when the flags were read
    const auto eq = spec.rfind('=');
    ec.regions.emplace_back(spec.substr(0, eq), std::stoull(spec.substr(eq + 1)));
  }
  ec.open_regions = open_regions;
  return Engine::create(ec, std::move(*store));
}

// The directory a rule must name for PATH: PATH itself, or a file's directory (files are
// replaced by renaming a new one over them, which a rule on the old file would not cover).
std::string rule_dir(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return path;
  const std::string parent = std::filesystem::path(path).parent_path().string();
  return parent.empty() ? "." : parent;
}

// The sandbox as the settings ask for it, for the worker process calling it. Sanitizer builds
// reserve terabytes of address space for their shadow memory: no address-space limit there.
sandbox::Options sandbox_options(const LoaderConfig& cfg, const std::optional<sandbox::User>& user) {
  sandbox::Options o;
  o.syscall_filter = cfg.sandbox;
#if !defined(__SANITIZE_ADDRESS__)
  o.address_space = cfg.max_memory;
#endif
  o.confine = cfg.sandbox;
  o.user = user;
  // Without trusted-network the worker's UCX has no network transport, and its connections
  // are the keepers' (TLS clients and peers, same-host door): no socket of its own.
  o.sockets = cfg.trusted_network;
  uint16_t listen_port = 0;
  if (auto addr = net::parse_host_port(cfg.listen); addr.ok()) {
    listen_port = ntohs(reinterpret_cast<const sockaddr_in*>(&*addr)->sin_port);  // same place in sockaddr_in6
    o.keep_bind_service = listen_port > 0 && listen_port < 1024;  // a restarted worker binds the port again
  }
  // Serving: the trust and the clients (reloaded when they change), UCX's
  // shared-memory segments, what UCX and LLVM read of the machine and of processes (UCX
  // checks a shared-memory peer's start time in /proc/PID/stat; another process's memory
  // and descriptors there take ptrace rights, which the worker does not have).
  sandbox::FileRules& serve = o.serve_files;
  serve.read = {rule_dir(cfg.trust), "/proc", "/sys"};
  if (!cfg.clients.empty()) serve.read.push_back(rule_dir(cfg.clients));
  if (!cfg.cache.empty()) serve.read.push_back(cfg.cache);  // its hits, read without the service (EngineConfig::read_cache_dir)
  serve.write = {"/dev/shm", "/dev/null"};  // not the cache: only the compile service writes it
  // Starting: also the libraries UCX loads, and its settings.
  o.start_files = serve;
  for (const char* p : {"/usr/lib", "/lib", "/lib64", "/usr/lib64", "/etc/ld.so.cache", "/etc/ucx"}) o.start_files.read.push_back(p);
  // Serving, a TCP port is bound only by UCX's listener, at the listen port (trusted-network):
  // a kernel binds none, another loader's included (Landlock ABI 4; guarded by escape_bind4
  // in adversary.c). UCX's tcp binds its own ports while starting, before this applies. A
  // listen port 0 (a free one, which the first worker's listener picks) leaves binds to a free
  // port allowed, as Landlock's rule for port 0 says.
  o.serve_files.tcp_bind = std::vector<uint16_t>{};
  if (cfg.trusted_network) o.serve_files.tcp_bind->push_back(listen_port);
  return o;
}

// The compile service's sandbox: the worker's user and privileges, no seccomp filters (it
// runs no kernels), and only the trust (read) and the cache (write).
sandbox::Options compiler_sandbox(const LoaderConfig& cfg, const std::optional<sandbox::User>& user) {
  sandbox::Options o;
  o.syscall_filter = false;
#if !defined(__SANITIZE_ADDRESS__)
  o.address_space = cfg.max_memory;
#endif
  o.confine = cfg.sandbox;
  o.user = user;
  o.start_files.read = {rule_dir(cfg.trust), "/proc", "/sys"};
  o.start_files.write = {"/dev/null"};
  if (!cfg.cache.empty()) o.start_files.write.push_back(cfg.cache);
  o.serve_files = o.start_files;
  return o;
}

// The key service's sandbox: no files but /dev/null and its own /proc entry (the filters
// read its maps), no capabilities, no new threads, the filters. It is not dumpable from its
// start (key_service.h).
sandbox::Options key_service_sandbox(const LoaderConfig& cfg) {
  sandbox::Options o;
  o.syscall_filter = cfg.sandbox;
  o.confine = cfg.sandbox;
  o.start_files.read = {"/proc/self"};
  o.start_files.write = {"/dev/null"};
  o.serve_files = o.start_files;
  o.no_new_threads = true;
  return o;
}

// The worker's UCX transports. Never cma, knem or xpmem, which reach into other processes'
// memory (the sandbox refuses process_vm_readv/writev), nor posix shared memory, which
// attaches a peer's segment through /proc/PID/fd (ptrace rights, which the worker does not
// have): local peers meet it over sysv shared memory. Running as another user than its
// local clients, it cannot attach their segments either: tcp then.
// Without trusted-network the worker's UCX has no network transport at all: its only clients
// are this host's processes of its own user, through the same-host door, over sysv ("self"
// when the worker runs as another user: then UCX serves nobody, and the TLS front door
// everybody).
Result<std::string> worker_transports(bool other_user, bool trusted_network) {
  std::vector<std::string> drop = {"cma", "knem", "xpmem", "posix"};
  if (other_user) drop.push_back("sysv");
  auto tls = net::tls_without(std::getenv("UCX_TLS"), drop);
  if (trusted_network || !tls.ok()) return tls;
  if (other_user) return std::string("self");
  if (!net::sysv_enabled(tls->c_str()))
    return Error(Errc::invalid_argument, std::string("UCX_TLS=") + std::getenv("UCX_TLS") +
                                             ": without trusted-network the loader's UCX serves only this host's "
                                             "processes of its own user, over System V shared memory (sysv), which this "
                                             "leaves out")
        .hint("unset UCX_TLS, or include sysv")
        .hint("pass --trusted-network (trusted-network: true) only if every host that can reach this loader's UCX is "
              "trusted, such as the nodes of an RDMA fabric");
  return std::string("sysv");
}
Status set_worker_transports(bool other_user, bool trusted_network) {
  auto tls = worker_transports(other_user, trusted_network);
  XC_TRY(tls);
  ::setenv("UCX_TLS", tls->c_str(), 1);
  return {};
}

// UCX trusts every peer that reaches it (loader/SECURITY.md, "The network"): without
// trusted-network it opens no port at all (no listener, no network transport: the listen
// address, a loopback one, only names the loader and its same-host door).
Status check_ucx_reach(const LoaderConfig& cfg) {
  if (cfg.trusted_network) return {};
  auto addr = net::parse_host_port(cfg.listen);
  if (!addr.ok()) return addr.take_error();
  const char* trusting = "pass --trusted-network (trusted-network: true) only if every host that can reach this "
                         "loader's UCX is trusted, such as the nodes of an RDMA fabric";
  if (!net::is_loopback(*addr))
    return Error(Errc::invalid_argument, "listen " + cfg.listen +
                                             ": without trusted-network the loader's UCX serves only this host (over "
                                             "shared memory, through its same-host door), so its listen address is a "
                                             "loopback one; UCX trusts every peer that reaches it (no key checked below "
                                             "the loader, nothing encrypted)")
        .hint("serve other hosts through the TLS front door: --tls-listen 0.0.0.0:7401 --listen 127.0.0.1:7400 "
              "(README, 'Over a network you do not trust')")
        .hint(trusting);
  return {};
}

// The worker process: engine, UCX server, executors. Returns its exit code; a restart after a
// kernel crash or time-out leaves through _exit(exit_code::kKernelFailure) inside the server.
// Who may connect: the node key and the authorized clients, read once by the supervisor so
// that every worker has the same node key and a bad file stops the start. The private key
// is only in the key service's process (loader/keys): never here, so never in a worker.
struct Access {
  std::optional<keys::KeyService> node_key;
  std::optional<auth::AuthorizedKeys> clients;  // nullopt: allow-anyone
  std::optional<sandbox::User> user;            // the worker's, when it is not the loader's
};

// The cache directory exists before the worker starts (its file rules name it), and belongs
// to the user the worker runs as.
Status prepare_cache(const std::string& dir, const std::optional<sandbox::User>& user) {
  if (dir.empty()) return {};
  std::error_code ec;
  const bool created = std::filesystem::create_directories(dir, ec);
  if (ec) return Error(Errc::io, "cache " + dir + ": " + ec.message());
  if (!user) return {};
  struct stat st {};
  if (created && ::chown(dir.c_str(), user->uid, user->gid) != 0)
    return Error(Errc::io, "cache " + dir + ": cannot give it to " + user->name + ": " + std::strerror(errno));
  if (::stat(dir.c_str(), &st) != 0 || st.st_uid != user->uid)
    return Error(Errc::invalid_argument, "cache " + dir + ": belongs to uid " + std::to_string(st.st_uid) + ", but the worker runs as " + user->name)
        .hint("chown -R " + user->name + " " + dir + ", or choose another --cache");
  return {};
}

// The directory of the worker's file rules that holds `path`, or "" if none does: what a
// kernel could read (or write) there.
std::string worker_reaches(const LoaderConfig& cfg, const std::string& path) {
  std::error_code ec;
  const std::filesystem::path file = std::filesystem::weakly_canonical(path, ec);
  if (ec) return "";
  const sandbox::Options o = sandbox_options(cfg, std::nullopt);
  std::vector<std::string> dirs = o.start_files.read;
  dirs.insert(dirs.end(), o.start_files.write.begin(), o.start_files.write.end());
  for (const std::string& d : dirs) {
    const std::filesystem::path dir = std::filesystem::weakly_canonical(d, ec);
    if (ec) continue;
    auto [end, at] = std::mismatch(dir.begin(), dir.end(), file.begin(), file.end());
    if (end == dir.end()) return dir.string();
  }
  return "";
}

Result<Access> load_access(const LoaderConfig& cfg) {
  Access a;
  if (!cfg.node_key.empty() && cfg.sandbox)
    if (std::string dir = worker_reaches(cfg, cfg.node_key); !dir.empty())
      return Error(Errc::invalid_argument, cfg.node_key + ": the node's private key lies in " + dir +
                                               ", which the worker that runs kernels may read")
          .hint("keep it apart from the trust directory and the clients: for example --node-key /etc/xcargo/node.key "
                "with --trust /etc/xcargo/trust/ and --clients /etc/xcargo/clients/ (or a clients file in that directory)");
  if (cfg.clients.empty() && !cfg.allow_anyone)
    return Error(Errc::invalid_argument, "no authorized clients: the loader would serve nobody")
        .hint("pass --clients PATH (a directory of clients' .pub files, or a key-list file; loader/SECURITY.md)")
        .hint("or --allow-anyone to serve every client that can reach the port, unauthenticated");
  if (!cfg.clients.empty() && cfg.allow_anyone)
    return Error(Errc::invalid_argument, "both clients and allow-anyone are set").hint("choose one");
  if (!cfg.clients.empty()) {
    auto c = auth::AuthorizedKeys::load(cfg.clients);
    if (!c.ok()) return Error(c.error().code(), "clients: " + c.error().message());
    a.clients = std::move(*c);
  }
  if (!cfg.user.empty()) {
    if (::geteuid() != 0) return Error(Errc::invalid_argument, "user " + cfg.user + ": only a loader started as root can change user").hint("leave out --user, or start the loader as root");
    auto u = sandbox::find_user(cfg.user);
    if (!u.ok()) return u.take_error();
    a.user = *u;
  }
  XC_TRY(prepare_cache(cfg.cache, a.user));
  // The node key, loaded by its own process. An encrypted key's passphrase: $XCARGO_PASSPHRASE
  // (a service's environment), or the terminal of an admin who starts the loader by hand.
  // Then it leaves this process's environment too, so workers never inherit it.
  const PassphraseSource passphrase;
  auto keys = keys::KeyService::start(cfg.node_key, passphrase, [&cfg](int control_fd) -> Status {
    const sandbox::Options box = key_service_sandbox(cfg);
    XC_TRY(sandbox::prepare(box, {control_fd}));
    return sandbox::lock_down(box);
  }, cfg.nodes.size() > 0);
  forget_passphrase_env(passphrase);
  if (!keys.ok()) return keys.take_error();
  a.node_key.emplace(std::move(*keys));
  return a;
}

// The compile service's process, serving a worker (or --exec's engine) on fd.
int run_compiler(const LoaderConfig& cfg, const std::optional<sandbox::User>& user, int fd) {
  if (auto s = sandbox::prepare(compiler_sandbox(cfg, user), {fd}); !s.ok()) return fail(s.error());
  compiler::Options o;
  o.trust = cfg.trust;
  o.cache_dir = cfg.cache;
  o.limits.max_cargo_size = std::min<uint64_t>(cfg.max_cargo, format::kMaxCargoSize);
  o.job_limit = timing::kCompileLimit;
  o.standby_at_start = cfg.prefer == "bitcode";  // every push compiles
  o.trust_stamp = [&cfg] { return files_stamp(cfg.trust); };
  o.log = [](std::string_view line) {
    log_line(line);
    flush_log();
  };
  const int rc = compiler::serve(fd, o);
  flush_log();
  return rc;
}

// Starts a compile service for --exec's engine, a child of this process: the engine's kernels
// then never share a process with what writes the cache.
Result<int> start_compiler(const LoaderConfig& cfg) {
  int fd = -1;
  auto pid = start_compile_service(
      [&cfg](int service_fd) {
        ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);  // this engine's kernels cannot trace the service
        return run_compiler(cfg, std::nullopt, service_fd);
      },
      &fd);
  if (!pid.ok()) return pid.take_error();
  return fd;
}

// The metrics endpoint's process (metrics_server.h), a child of the supervisor: it holds the
// listening socket and a read-only view of the counters, nothing else, confined like the key
// service (the worker's user, no files, no new threads, the filters).
Result<pid_t> start_metrics(const LoaderConfig& cfg, const std::optional<sandbox::User>& user, int listen_fd, int stats_fd) {
  ChildLog child_log = log_for_child();
  const pid_t pid = ::fork();
  if (pid < 0) {
    parent_done(child_log);
    return Error(Errc::io, std::string("cannot start the metrics endpoint's process: ") + std::strerror(errno));
  }
  if (pid > 0) {
    parent_done(child_log);
    return pid;
  }
  child_stderr(child_log);
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);  // the loader gone, so is its endpoint
  ::prctl(PR_SET_NAME, "xcargo-metrics");
  sandbox::Options box;
  box.syscall_filter = cfg.sandbox;
  box.confine = cfg.sandbox;
  box.user = user;
  box.start_files.read = {"/proc/self"};
  box.start_files.write = {"/dev/null"};
  box.serve_files = box.start_files;
  box.no_new_threads = true;
  if (auto c = sandbox::prepare(box, {listen_fd, stats_fd}); !c.ok()) ::_exit(fail_in_log(c.error()));
  auto stats = NodeStats::open(stats_fd, false);
  if (!stats.ok()) ::_exit(fail_in_log(stats.error()));
  if (auto s = sandbox::lock_down(box); !s.ok()) ::_exit(fail_in_log(s.error()));
  const int rc = serve_metrics(listen_fd, **stats, g_stop);
  flush_log();
  ::_exit(rc);
}

// Blocks until the supervisor says go (true), or its end of go_fd closes or the loader is
// stopping (false).
bool wait_for_go(int go_fd) {
  char c;
  for (;;) {
    if (g_stop) return false;  // told to stop while it started
    const ssize_t n = ::read(go_fd, &c, 1);
    if (n == 1) return !g_stop;
    if (n < 0 && errno == EINTR && !g_stop) continue;
    return false;
  }
}

// Until it takes over, a standby's lines say so; its trust and clients watcher reloads
// quietly (the serving worker logs what changed).
std::atomic<bool> g_serving{false};
void worker_log(std::string_view line) { log_line(g_serving ? std::string(line) : "standby: " + std::string(line)); }
void worker_note(const std::string& line) {
  if (g_serving) log_line(line);
}

// Ends this worker in order, once, saying why: the line is flushed at once, since the
// supervisor kills a worker that ends slowly (kEndingGrace).
void end_in_order(std::string_view why) {
  if (g_stop.exchange(true)) return;
  log_line(why);
  flush_log();
}

// The worker's server settings from cfg and its channels to the keepers (door_fd, tls_fd);
// the gate and when it listens are the caller's to set.
ServerOptions worker_server_options(const LoaderConfig& cfg, int door_fd, int tls_fd) {
  ServerOptions so;
  so.listen = cfg.listen;
  so.ucx_listener = cfg.trusted_network;
  so.tls_listen = cfg.tls_listen;
  so.door_fd = door_fd;
  so.tls_fd = tls_fd;
  so.on_door_lost = [] {
    end_in_order("the same-host door's channel is gone (no new same-host client would reach this worker); ending this "
                 "worker in order: its standby has a channel of its own");
  };
  so.executors = cfg.executors;
  so.timeout_s = cfg.timeout_s;
  so.inline_quick = cfg.inline_us > 0;
  so.spin = std::chrono::microseconds(cfg.spin_us);
  so.node_id = cfg.node_id;
  so.cluster = cfg.nodes;
  so.one_sided_regions = cfg.one_sided_regions;
  so.trusted_network = cfg.trusted_network;
  return so;
}

// A worker ready but for listening: says "standby" on addr_fd, waits for its go, then takes
// over (node memory, the port, its address line) and serves until the loader stops. Returns
// the worker's exit code; the watcher is joined on every path.
int stand_by_then_serve(Engine& engine, UcxServer& server, NodeStats* stats, WorkerReload& reload, std::thread& watcher,
                        const sandbox::Confinement& confined, int addr_fd, int go_fd) {
  // Ready: wait to take over.
  (void)!::write(addr_fd, "standby\n", 8);
  auto stand_down = [&](int rc) {
    g_stop = true;
    watcher.join();
    flush_log();
    return rc;
  };
  if (!wait_for_go(go_fd)) {
    server.run(g_stop);  // returns at once: g_stop is set
    return stand_down(0);
  }
  ::prctl(PR_SET_NAME, "xcargo-loader");  // the serving worker now (supervisor.cpp)
  reload.check();  // keys and rules changed since it started hold before its first request
  g_serving = true;
  if (stats) stats->begin_serving();
  engine.keep_cargos(true);
  if (auto s = engine.open_regions(); !s.ok()) {
    fail_in_log(s.error());
    return stand_down(exit_code::kCannotStart);
  }
  if (const Regions& r = engine.regions(); r.adopted() || r.dropped())
    log_line("node memory: " + std::to_string(r.adopted()) + " regions kept from the previous worker" +
             (r.dropped() ? "; " + std::to_string(r.dropped()) + " table entries dropped (they described no region that fits)" : ""));
  if (auto s = server.listen(timing::kTakeOverListen); !s.ok()) {
    fail_in_log(s.error());
    return stand_down(exit_code::kCannotStart);
  }
  // HOST:PORT, the front door's, then how it is confined (supervisor.h)
  const std::string line = server.address() + "\t" + server.tls_address() + "\t" + sandbox::describe(confined) + "\n";
  (void)!::write(addr_fd, line.data(), line.size());
  server.run(g_stop);
  g_stop = true;
  watcher.join();
  flush_log();
  return 0;
}

// What a worker needs of the loader's access: its user, the client keys as the supervisor
// loaded them (a worker that cannot load them again keeps these), and the node key.
struct WorkerAccess {
  std::optional<sandbox::User> user;
  std::optional<auth::AuthorizedKeys> clients;  // nullopt: allow-anyone
  PublicKey node_key;
  std::string tenant;  // whose kernels it runs: only its keys (and the node keys) are accepted
};

int run_worker(const LoaderConfig& cfg, const WorkerAccess& access, int addr_fd, int go_fd, char* incident, size_t incident_size,
               int compiler_fd, int key_fd, int door_fd, int tls_fd) {
  sandbox::Options box = sandbox_options(cfg, access.user);
  auto confined = sandbox::prepare(box, {addr_fd, go_fd, compiler_fd, key_fd, door_fd, tls_fd, cfg.node_memory_fd, cfg.kept_cargos_fd,
                                        cfg.node_stats_fd});
  if (!confined.ok()) return fail_in_log(confined.error());
  if (cfg.sandbox || !cfg.trusted_network)
    if (auto s = set_worker_transports(access.user.has_value(), cfg.trusted_network); !s.ok()) return fail_in_log(s.error());
  // Node memory is opened when this worker takes over: until then the one it replaces may
  // still change the table.
  // Without its compile service (its connection shut down, by a kernel say) a worker would
  // refuse every later bitcode push: it ends in order instead, and its standby, which has a
  // service of its own, serves.
  auto on_compiler_lost = [] {
    end_in_order("the compile service's connection is gone (every later compile would fail); ending this worker in order: "
                 "its standby has a compile service of its own");
  };
  const std::string trust_stamp = files_stamp(cfg.trust);  // before the engine reads the directory
  auto engine = make_engine(cfg, worker_log, compiler::remote(compiler_fd, timing::kCompileLimit, on_compiler_lost), false, true);
  if (!engine.ok()) return fail_in_log(engine.error());
  Handler handler(**engine, cfg.max_input, worker_log, cfg.max_hops, cfg.log_every_run);
  // The node's counters, which this worker adds to once it serves.
  std::unique_ptr<NodeStats> stats;
  if (cfg.node_stats_fd >= 0) {
    auto st = NodeStats::open(cfg.node_stats_fd, true);
    if (!st.ok()) return fail_in_log(st.error());
    stats = std::move(*st);
    handler.set_node_stats(stats.get());
  }
  ServerOptions so = worker_server_options(cfg, door_fd, tls_fd);
  // The clients as they are now (a restarted worker sees what changed since the start), or
  // the supervisor's copy if they no longer load; a tenant's worker, only the tenant's.
  std::optional<auth::AuthorizedKeys> clients = access.clients;
  std::string clients_stamp = cfg.clients.empty() ? "" : files_stamp(cfg.clients);
  if (clients)
    if (auto c = load_clients(cfg.clients, access.tenant); c.ok()) clients = std::move(*c);
  // The same without its connection to the key service (shut down by a kernel, say): it
  // could not answer any client's hello.
  auto on_key_lost = [] {
    end_in_order("the key service's connection is gone (every later handshake would fail); ending this worker in order: "
                 "its standby has a connection of its own");
  };
  AuthGate gate(std::make_shared<keys::ServiceKey>(key_fd, access.node_key, timing::kKeyServiceLimit, on_key_lost),
                clients);
  so.gate = &gate;
  so.listen_at_start = false;
  so.on_port_released = [addr_fd] { (void)!::write(addr_fd, "ending\n", 7); };  // the next worker may listen now
  auto server = UcxServer::start(so, handler, worker_log, incident, incident_size);
  if (!server.ok()) return fail_in_log(server.error());
  // Every thread this worker will have starts between the two steps of the lock-down: after
  // Landlock's narrower rules (which they inherit), before the seccomp filters, which then
  // refuse new threads: a kernel cannot leave one running after its own run.
  if (auto s = sandbox::lock_files(box); !s.ok()) return fail_in_log(s.error());
  // A standby ran no kernel: what a change revokes ends only the serving worker.
  WorkerReload reload({cfg.trust, cfg.clients, access.tenant, worker_note,
                       [](const std::string& why) {
                         if (g_serving) end_in_order(why);
                       }},
                      gate, **engine, clients, clients_stamp, trust_stamp);
  std::thread watcher([&] { reload.run(g_stop); });
  (*server)->start_threads(g_stop);
  start_log();
  box.no_new_threads = true;
  if (auto s = sandbox::lock_calls(box); !s.ok()) {
    g_stop = true;
    watcher.join();
    return fail_in_log(Error(s.error().code(), s.error().message()).hint("this kernel must allow seccomp filters; 'sandbox: false' runs without them (not for production)"));
  }
  // The first push's one-time costs, taken before this worker is ready (35-45 ms of one core
  // here; they made the first push 1.5 to 3 ms slower).
  (*engine)->warm_up();
  // What earlier workers kept, loaded now: the clients that pushed it need not push again.
  size_t refused = 0;
  if (size_t loaded = (*engine)->load_kept(&refused, timing::kPreloadBudget); loaded || refused)
    worker_log("kept cargos: " + std::to_string(loaded) + " loaded from earlier workers" +
               (refused ? "; " + std::to_string(refused) + " refused" : ""));
  return stand_by_then_serve(**engine, **server, stats.get(), reload, watcher, *confined, addr_fd, go_fd);
}

// Every setting from the one table (config.cpp): a flag here, a key in --config's file,
// the same checks for both.
struct SettingFlags {
  std::vector<std::string> values = std::vector<std::string>(settings().size());
  std::vector<std::string> regions;  // the one repeatable setting
  std::vector<CLI::Option*> given = std::vector<CLI::Option*>(settings().size());

  // Declares each setting's flag on app, its value bound to values (regions: to regions).
  void declare(CLI::App& app) {
    for (size_t i = 0; i < settings().size(); ++i) {
      const Setting& s = settings()[i];
      if (!s.value) given[i] = app.add_flag(flag_of(s), s.help);
      else if (std::string_view(s.name) == "regions") given[i] = app.add_option(flag_of(s), regions, s.help)->type_name(s.value);
      else given[i] = app.add_option(flag_of(s), values[i], s.help)->type_name(s.value);
    }
  }
  // Applies the flags given (after parsing) to cfg, over what --config's file set.
  Status apply(LoaderConfig& cfg) const {
    for (size_t i = 0; i < settings().size(); ++i) {
      const Setting& s = settings()[i];
      if (given[i]->count() == 0) continue;
      if (!s.value) {
        if (auto st = s.apply(cfg, s.on_by_default ? "false" : "true"); !st.ok()) return st;
        continue;
      }
      for (const std::string& v : std::string_view(s.name) == "regions" ? regions : std::vector<std::string>{values[i]})
        if (auto st = s.apply(cfg, v); !st.ok())
          return Error(Errc::invalid_argument, flag_of(s) + " " + v + ": " + st.error().message());
    }
    return {};
  }
};

// Reads the command line into cfg and exec: --config's file first, the flags over it. An exit
// code when the loader ends here (--help, --version, a bad flag or setting); nullopt to go on.
std::optional<int> read_command_line(int argc, char** argv, LoaderConfig& cfg, bool& exec) {
  CLI::App app{"xcargo-loader: verifies cargos against trusted keys, compiles or links them for this CPU, runs them"};
  app.name("xcargo-loader");
  app.set_version_flag("--version", std::string("xcargo-loader ") + XCARGO_VERSION_STRING);
  std::string config_file;
  bool verbose = false;
  app.add_option("--config", config_file, "Settings file (see loader.example.yaml); flags override it")->type_name("FILE");
  auto* exec_flag = app.add_flag("--exec", exec, "Serve one client over stdin/stdout (what 'xcargo run' without --to starts)");
  SettingFlags flags;
  flags.declare(app);
  app.get_option("--listen")->excludes(exec_flag);
  app.add_flag("-v,--verbose", verbose, "--exec: log every request on stderr");
  app.footer("Every setting is also a key of --config's file, by the same name (loader.example.yaml); flags override it.\n"
             "With --listen, the loader logs one line per request on stderr (or --log FILE), each stamped with the UTC time\n"
             "unless systemd's JOURNAL_STREAM is set, and stops cleanly on SIGTERM or SIGINT.");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::fprintf(stderr, "xcargo-loader: error: %s\nhint: run 'xcargo-loader --help' for usage\n", e.what());
    return 2;
  }
  if (!config_file.empty())
    if (auto s = read_config_file(config_file, cfg); !s.ok()) return fail(s.error());
  if (auto s = flags.apply(cfg); !s.ok()) return fail(s.error());
  cfg.verbose = verbose;
  return std::nullopt;
}

// With --cluster: the cluster's nodes in cfg, and this node's address there as where it
// serves, unless --listen or --tls-listen says otherwise. Nothing without --cluster.
Status apply_cluster(LoaderConfig& cfg, bool exec) {
  if (cfg.cluster.empty()) return {};
  auto c = read_cluster_file(cfg.cluster);
  if (!c.ok()) return c.take_error();
  const ClusterNode* me = c->find(cfg.node_id);
  if (!me)
    return Error(Errc::invalid_argument, cfg.cluster + ": has no node " + std::to_string(cfg.node_id))
        .hint("pass --node-id with one of the ids 0 to " + std::to_string(c->size() - 1));
  // Its address there is where it serves: a tls:// one is its front door, with UCX for
  // this host beside it (a free loopback port).
  if (const NodeAddress a = split_scheme(me->address); a.scheme == NodeAddress::Scheme::tls) {
    if (cfg.tls_listen.empty() && !exec) cfg.tls_listen = a.host_port;
    if (cfg.listen.empty() && !exec) cfg.listen = "127.0.0.1:0";
  } else if (cfg.listen.empty() && !exec) {
    cfg.listen = me->address;
  }
  cfg.nodes = std::move(*c);
  return {};
}

// host_port with its host resolved to an address; `where` names it in an error.
// Keeps tls://; drops ucx:// (UCX either way for a loader: it says so to clients).
Status resolve_address(std::string& host_port, const std::string& where) {
  const NodeAddress a = split_scheme(host_port);
  const std::string scheme = a.scheme == NodeAddress::Scheme::tls ? "tls://" : "";
  auto addr = net::parse_host_port(a.host_port);
  if (!addr.ok()) return Error(addr.error().code(), where + ": " + addr.error().message());
  host_port = scheme + net::to_host_port(reinterpret_cast<const sockaddr*>(&*addr));
  return {};
}

// What the loader serves, checked: something to serve (--exec: no address), every address
// resolved (listen, tls-listen, the cluster's nodes), signers to trust, no --log with --exec.
Status check_serving(LoaderConfig& cfg, bool exec) {
  if (exec) cfg.listen.clear();
  if (!exec && cfg.listen.empty())
    return Error(Errc::invalid_argument, "nothing to serve").hint("pass --listen HOST:PORT (or 'listen:' in --config), or --exec");
  // Host names are resolved here, once, before any sandbox: the worker reads no /etc/hosts
  // and asks no name server (Landlock, seccomp).
  if (!cfg.listen.empty()) {
    XC_TRY(resolve_address(cfg.listen, "listen"));
    XC_TRY(check_ucx_reach(cfg));
  }
  if (!cfg.tls_listen.empty()) {
    if (exec) return Error(Errc::invalid_argument, "--tls-listen is for a loader that serves --listen");
    XC_TRY(resolve_address(cfg.tls_listen, "tls-listen"));
  }
  for (ClusterNode& n : cfg.nodes.nodes) XC_TRY(resolve_address(n.address, cfg.cluster + ": node " + std::to_string(n.id)));
  if (cfg.trust.empty())
    return Error(Errc::invalid_argument, "no trusted signers").hint("pass --trust DIR with the signers' .pub files");
  if (cfg.tenants == "per-key" && !exec) {
    if (cfg.allow_anyone)
      return Error(Errc::invalid_argument, "tenants: per-key needs clients: a loader that serves anyone cannot tell them apart")
          .hint("give it --clients, or leave tenants single");
    if (cfg.trusted_network)
      return Error(Errc::invalid_argument, "tenants: per-key with trusted-network: UCX's listener cannot tell tenants apart "
                                           "before a connection's handshake")
          .hint("serve tenants through the same-host door and the TLS front door (no trusted-network), or leave tenants single");
  }
  if (cfg.tenant_users == "dynamic" && !exec) {
    if (cfg.tenants != "per-key")
      return Error(Errc::invalid_argument, "tenant-users: dynamic is for tenants: per-key").hint("add --tenants per-key");
    if (::geteuid() != 0)
      return Error(Errc::invalid_argument, "tenant-users: dynamic: only a loader started as root can give tenants uids of their own")
          .hint("start the loader as root, or leave tenant-users shared");
    if (!cfg.user.empty())
      return Error(Errc::invalid_argument, "tenant-users: dynamic with user " + cfg.user + ": each tenant's workers have a user of their own")
          .hint("choose one");
    if (cfg.tls_listen.empty())
      return Error(Errc::invalid_argument, "tenant-users: dynamic needs tls-listen: workers under other uids have no same-host door")
          .hint("give it a TLS front door: --tls-listen HOST:PORT (clients then reach it at tls://HOST:PORT)");
  }
  if (exec && !cfg.log.empty())
    return Error(Errc::invalid_argument, "--log is for a loader that serves --listen")
        .hint("with --exec, the log is stderr of the 'xcargo' that started this loader");
  return {};
}

// The memory this process owns and each worker maps in turn, its descriptors set in cfg:
// node memory, kept cargos, the node's counters. Returns the counters, opened for writing.
Result<std::unique_ptr<NodeStats>> create_shared_memory(LoaderConfig& cfg) {
  // Regions live in memory this process owns, mapped by each worker in turn: they outlive
  // a worker that a kernel's failure ends.
  auto memory = Regions::create_memory(EngineConfig{}.max_region_bytes);
  if (!memory.ok()) return memory.take_error();
  cfg.node_memory_fd = *memory;
  // So do the cargos workers loaded (verified again by the worker that loads them).
  auto kept = CargoStore::create_memory(std::min<uint64_t>(cfg.max_cargo, format::kMaxCargoSize));
  if (!kept.ok()) return kept.take_error();
  cfg.kept_cargos_fd = *kept;
  // And the node's counters (loader/stats/node_stats.h): workers count, this process counts
  // restarts, the metrics endpoint reads them.
  auto stats_fd = NodeStats::create_memory();
  if (!stats_fd.ok()) return stats_fd.take_error();
  cfg.node_stats_fd = *stats_fd;
  return NodeStats::open(*stats_fd, true);
}

// The cluster's other nodes reached over TLS (HOST:PORT): what the TLS keeper dials for a
// worker (tls_keeper.h), and nothing else.
std::vector<std::string> tls_peers(const LoaderConfig& cfg) {
  std::vector<std::string> out;
  for (const ClusterNode& n : cfg.nodes.nodes)
    if (const NodeAddress a = split_scheme(n.address); a.scheme == NodeAddress::Scheme::tls && n.id != cfg.node_id)
      out.push_back(a.host_port);
  return out;
}

// Sets so.door: whether the loader has a same-host door. An error when nothing could reach
// the loader (no door, no trusted network, no TLS front door).
Status choose_door(const LoaderConfig& cfg, const Access& access, SupervisorOptions& so) {
  // The door offers a worker's System V shared memory; a worker without it opens none
  // (its clients take the listener, or the TLS front door).
  const bool dynamic = cfg.tenant_users == "dynamic";  // each tenant's workers another user
  auto transports = worker_transports(access.user.has_value() || dynamic, cfg.trusted_network);
  if (!transports.ok()) return transports.take_error();
  so.door = net::sysv_enabled(transports->c_str());
  if (!cfg.trusted_network && !so.door && cfg.tls_listen.empty())
    return Error(Errc::invalid_argument, "nothing could reach this loader: its worker runs as " +
                                             (dynamic ? std::string("its tenant's own user") : access.user->name) +
                                             ", whose shared memory this user's clients cannot attach, and without "
                                             "trusted-network UCX takes no connection")
        .hint("give it a TLS front door: --tls-listen HOST:PORT (clients then reach it at tls://HOST:PORT)");
  return {};
}

// What the first log line says of the UCX address: who reaches this loader's UCX there, and how.
std::string ucx_what(const LoaderConfig& cfg, bool door) {
  if (cfg.trusted_network) return "UCX listener, trusted network: every host that reaches it is trusted";
  if (door) return "same-host door: UCX over shared memory for this user's processes (uid " + std::to_string(::geteuid()) + "); no UCX port";
  return "held, not served: no UCX port, no same-host door; clients use the TLS front door";
}

// The supervisor's hooks into the node's counters and the node key's service, and what its
// first line says of the key and the clients. access and node_stats outlive supervise().
void hook_supervisor(SupervisorOptions& so, Access& access, NodeStats& node_stats) {
  so.on_restart = [stats = &node_stats] { stats->worker_restarted(); };
  so.on_worker_ended = [stats = &node_stats](pid_t pid) { stats->worker_ended(pid); };
  so.connect_key = [a = &access]() -> Result<std::pair<int, uint64_t>> {
    auto c = a->node_key->connect();
    if (!c.ok()) return c.take_error();
    return std::pair<int, uint64_t>{c->fd, c->id};
  };
  so.disconnect_key = [a = &access](uint64_t id) { a->node_key->disconnect(id); };
  so.key_alive = [a = &access](std::string* why) { return a->node_key->alive(why); };
  so.started = "; node key " + to_hex(access.node_key->public_key().id) +
               (access.clients ? "; " + std::to_string(access.clients->size()) + " authorized client keys"
                               : "; WARNING: allow-anyone: every client that can reach this port is served, unauthenticated");
  if (access.clients)
    for (const std::string& why : access.clients->ignored()) so.started_notes.push_back("clients: " + why);
}

// Stops the metrics endpoint's process (none unless pid > 0) and removes its unix socket.
void stop_metrics(pid_t pid, const LoaderConfig& cfg) {
  if (pid <= 0) return;
  ::kill(pid, SIGTERM);
  while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
  }
  if (cfg.metrics.rfind("unix:", 0) == 0) ::unlink(cfg.metrics.c_str() + 5);
}
// The loader's own file, opened at start: each worker is started from it by exec (the same
// binary even if the file is replaced meanwhile), with an address layout of its own. -1
// when exec cannot run it (exec_works says why).
int g_exe_fd = -1;

// Whether exec runs the loader's own file, tried once at start by a child that exits at
// once (XCARGO_EXEC_PROBE): an aarch64 loader under qemu-user without binfmt_misc cannot,
// and qemu-user 7.2 then aborts a child that starts a thread after its exec failed. Empty
// if it can; else why not, and g_exe_fd is closed.
std::string exec_works() {
  if (g_exe_fd < 0) return std::string("cannot open /proc/self/exe: ") + std::strerror(errno);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setenv("XCARGO_EXEC_PROBE", "1", 1);
    char name[] = "xcargo-loader";
    char* const argv[] = {name, nullptr};
    ::fexecve(g_exe_fd, argv, environ);
    _exit(127);
  }
  int status = 0;
  while (pid > 0 && ::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0) return {};
  ::close(g_exe_fd);
  g_exe_fd = -1;
  return "exec of the loader's own file failed (qemu-user without binfmt_misc?)";
}

// How a worker starts by exec from the loader's own file (exec_plan.h): handed what it needs
// (worker_start.h) in a memory file named by XCARGO_WORKER_START.
Result<ExecPlan> plan_worker(const LoaderConfig& cfg, const WorkerAccess& access, const WorkerFds& fds) {
  WorkerStart w;
  w.cfg = cfg;
  w.user = access.user;
  w.node_key = access.node_key;
  if (access.clients) w.clients = clients_text(*access.clients);
  w.tenant = access.tenant;
  w.addr_fd = fds.addr, w.go_fd = fds.go, w.incident_fd = fds.incident, w.compiler_fd = fds.compiler, w.key_fd = fds.key;
  w.door_fd = fds.door, w.tls_fd = fds.tls;
  return plan_exec(g_exe_fd, "xcargo-loader", "XCARGO_WORKER_START", encode(w),
                   {fds.addr, fds.go, fds.incident, fds.compiler, fds.key, fds.door, fds.tls, cfg.node_memory_fd,
                    cfg.kept_cargos_fd, cfg.node_stats_fd});
}

// How a compile service starts by exec: its settings and user (as a worker's start record,
// compiler_fd its end of the worker's connection) in a memory file named by
// XCARGO_COMPILER_START.
Result<ExecPlan> plan_compiler(const LoaderConfig& cfg, const WorkerAccess& access, int fd) {
  WorkerStart w;
  w.cfg = cfg;
  w.user = access.user;
  w.node_key = access.node_key;
  w.tenant = access.tenant;
  w.compiler_fd = fd;
  return plan_exec(g_exe_fd, "xcargo-compiler", "XCARGO_COMPILER_START", encode(w), {fd});
}

// The start record a process started by exec was handed: the memory file named by the
// environment variable `variable`, whose text is `start_fd`.
Result<WorkerStart> read_start(const char* variable, const char* start_fd) {
  ::unsetenv(variable);  // nothing later (kernels, the compile service) sees it
  int fd = -1;
  const char* end = start_fd + std::strlen(start_fd);
  if (auto [p, ec] = std::from_chars(start_fd, end, fd); ec != std::errc() || p != end || fd < 0)
    return Error(Errc::invalid_argument, std::string(variable) + ": not a descriptor");
  auto bytes = read_file("/proc/self/fd/" + std::to_string(fd), kMaxWorkerStart);
  ::close(fd);
  if (!bytes.ok()) return bytes.take_error();
  return decode_worker_start(*bytes);
}

// main() of a compile service started by exec (plan_compiler).
int run_started_compiler(const char* start_fd) {
  ::prctl(PR_SET_NAME, "xcargo-compiler");
  ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);  // as its supervisor: no process of its user traces it
  if (::getppid() == 1) return 1;  // its supervisor is gone already (PR_SET_PDEATHSIG holds across exec)
  auto w = read_start("XCARGO_COMPILER_START", start_fd);
  if (!w.ok()) return fail_in_log(w.error());
  set_log_json(w->cfg.log_format == "json");
  if (!w->tenant.empty()) set_log_tag("tenant " + w->tenant + ": ");
  ::signal(SIGPIPE, SIG_IGN);
  return run_compiler(w->cfg, w->user, w->compiler_fd);
}

// main() of a worker started by exec (plan_worker): what its supervisor handed it, then run_worker.
int run_started_worker(const char* start_fd) {
  ::prctl(PR_SET_NAME, "xcargo-standby");
  if (::getppid() == 1) return 1;  // its supervisor is gone already (PR_SET_PDEATHSIG holds across exec)
  auto w = read_start("XCARGO_WORKER_START", start_fd);
  if (!w.ok()) return fail_in_log(w.error());
  set_log_json(w->cfg.log_format == "json");
  if (!w->tenant.empty()) set_log_tag("tenant " + w->tenant + ": ");
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  char* incident = nullptr;
  if (w->incident_fd >= 0) {
    void* p = ::mmap(nullptr, kIncidentSize, PROT_READ | PROT_WRITE, MAP_SHARED, w->incident_fd, 0);
    if (p != MAP_FAILED) incident = static_cast<char*>(p);
  }
  WorkerAccess access{w->user, std::nullopt, w->node_key, w->tenant};
  if (w->clients) {
    auto keys = auth::AuthorizedKeys::parse(*w->clients, "the supervisor's clients");
    if (!keys.ok()) return fail_in_log(keys.error());
    access.clients = std::move(*keys);
  }
  return run_worker(w->cfg, access, w->addr_fd, w->go_fd, incident, incident ? kIncidentSize : 0, w->compiler_fd, w->key_fd,
                    w->door_fd, w->tls_fd);
}


// How a supervision starts its workers and their compile services, for cfg and access (a
// tenant's, or the loader's only one): by exec from plans where the loader can exec itself
// (so.plan_worker, so.plan_compiler), else as the forked child (the mains returned).
std::pair<WorkerMain, CompilerMain> worker_mains(SupervisorOptions& so, const LoaderConfig& cfg, const WorkerAccess& wa) {
  const auto c = std::make_shared<const LoaderConfig>(cfg);
  const auto a = std::make_shared<const WorkerAccess>(wa);
  const auto at = [c](const Listen& listen) {
    LoaderConfig wc = *c;
    wc.listen = listen.ucx;
    wc.tls_listen = listen.tls;
    return wc;
  };
  if (g_exe_fd >= 0) {
    so.plan_worker = [at, a](const Listen& listen, const WorkerFds& fds) { return plan_worker(at(listen), *a, fds); };
    so.plan_compiler = [c, a](int fd) { return plan_compiler(*c, *a, fd); };
  }
  return {[at, a](const Listen& listen, int addr_fd, int go_fd, char* incident, size_t incident_size, int, int compiler_fd,
                  int key_fd, int door_fd, int tls_fd) {
            return run_worker(at(listen), *a, addr_fd, go_fd, incident, incident_size, compiler_fd, key_fd, door_fd, tls_fd);
          },
          [c, a](int fd) { return run_compiler(*c, a->user, fd); }};
}

// A tenant's supervision (tenants.h): workers that accept its keys and the node keys alone,
// with node memory, kept cargos and a cache directory of its own, behind the loader's door.
Result<TenantRun> prepare_tenant(const LoaderConfig& cfg, const Access& access, const Tenancy& tenancy, TenantUsers* users,
                                 const SupervisorOptions& base, DoorKeeper* door, const std::string& tenant) {
  const auto& names = tenancy.names();
  if (std::find(names.begin(), names.end(), tenant) == names.end())
    return Error(Errc::unauthenticated, "no such tenant in the clients file any more");
  std::optional<sandbox::User> user = access.user;
  if (users) {
    auto u = users->of(tenant);
    XC_TRY(u);
    user = *u;
  }
  LoaderConfig tc = cfg;
  if (!cfg.cache.empty()) tc.cache = cfg.cache + "/tenants/" + tenant;
  XC_TRY(prepare_cache(tc.cache, user));
  auto memory = Regions::create_memory(EngineConfig{}.max_region_bytes);
  XC_TRY(memory);
  auto kept = CargoStore::create_memory(std::min<uint64_t>(cfg.max_cargo, format::kMaxCargoSize));
  if (!kept.ok()) ::close(*memory);
  XC_TRY(kept);
  tc.node_memory_fd = *memory;  // the tenant's for as long as the loader runs
  tc.kept_cargos_fd = *kept;
  TenantRun run;
  run.options = base;
  run.options.tenant = tenant;
  run.options.door_keeper = door;
  run.options.ready_file.clear();  // the loader's, written once for all tenants
  run.options.started_notes.clear();
  const WorkerAccess wa{user, tenancy.keys_of(tenant), access.node_key->public_key(), tenant};
  std::tie(run.worker, run.compiler) = worker_mains(run.options, tc, wa);
  return run;
}

// A loader of tenants (tenants: per-key): the door opens now, for every tenant, the ready
// file says the loader serves, and each tenant's workers start on its first connection.
// Returns what run_supervisor returns.
// Rereads the clients every second until the loader stops: the tenancy changes for new
// connections, and a tenant left without keys ends with its workers.
void watch_tenancy(const LoaderConfig& cfg, SharedTenancy& tenancy, Tenants& tenants) {
  std::string stamp = files_stamp(cfg.clients);
  while (!g_stop) {
    for (int i = 0; i < 20 && !g_stop; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (std::string now = files_stamp(cfg.clients); now != stamp) stamp = now;
    else continue;
    auto c = auth::AuthorizedKeys::load(cfg.clients);
    auto t = c.ok() ? Tenancy::per_key(*c) : Result<Tenancy>(c.take_error());
    if (!t.ok()) {
      log_line("clients: tenants not reloaded (the old ones stay): " + t.error().message());
      flush_log();
      continue;
    }
    const auto before = tenancy.get();
    const std::vector<std::string> names = t->names();
    tenancy.set(std::move(*t));  // new connections first: none reaches a tenant that ends below
    log_line("clients: reloaded; " + std::to_string(names.size()) + " tenants");
    for (const std::string& name : before->names())
      if (std::find(names.begin(), names.end(), name) == names.end()) {
        log_line("clients: tenant " + name + " has no key any more: its workers end");
        tenants.end(name);
      }
    flush_log();
  }
}

Result<int> serve_tenants(const LoaderConfig& cfg, SupervisorOptions& so, SharedTenancy& tenancy, Tenants& tenants,
                          std::unique_ptr<DoorKeeper>& door, const TlsKeeper::Route& route,
                          const std::function<void(const std::string&)>& wanted) {
  // The key service is asked for connections by every tenant's supervision, one at a time.
  auto key_lock = std::make_shared<std::mutex>();
  so.connect_key = [inner = so.connect_key, key_lock] {
    std::lock_guard<std::mutex> g(*key_lock);
    return inner();
  };
  so.disconnect_key = [inner = so.disconnect_key, key_lock](uint64_t id) {
    std::lock_guard<std::mutex> g(*key_lock);
    inner(id);
  };
  so.key_alive = [inner = so.key_alive, key_lock](std::string* why) {
    std::lock_guard<std::mutex> g(*key_lock);
    return inner(why);
  };
  if (so.door) {
    DoorKeeper::Options d;
    d.host_port = cfg.listen;
    d.other_users = cfg.tls_listen.empty() ? "this loader has no TLS front door for other users (its admin can give it one: tls-listen)"
                                           : "reach it over TLS: tls://" + cfg.tls_listen;
    d.node_key = so.node_key;
    d.log = [](const std::string& line) { log_line(line); };
    d.route = route;
    d.wanted = wanted;
    auto k = DoorKeeper::open(std::move(d));
    XC_TRY(k);
    door = std::move(*k);
  }
  if (!cfg.ready_file.empty())
    if (auto s = write_file(cfg.ready_file, as_bytes(so.listen.ready_text())); !s.ok())
      return Error(Errc::io, cfg.ready_file + ": " + s.error().message());
  log_line("listening on " + so.listen.described(so.ucx_what) + so.started + "; " + std::to_string(tenancy.get()->names().size()) +
           " tenants, each with workers of its own from its first connection");
  for (const std::string& line : so.started_notes) log_line(line);
  flush_log();
  std::thread watcher([&] { watch_tenancy(cfg, tenancy, tenants); });
  const int rc = tenants.run(g_stop);
  watcher.join();  // g_stop is set
  if (!cfg.ready_file.empty() && cfg.ready_file != "-")
    if (auto cur = read_file(cfg.ready_file, 4096); cur.ok() && std::string(cur->begin(), cur->end()) == so.listen.ready_text())
      ::unlink(cfg.ready_file.c_str());
  log_line("stopped");
  flush_log();
  return rc;
}

// The loader that serves --listen: the key service, the shared memory, the ports it holds
// and the metrics endpoint, then supervise() until it stops. Returns main's exit code.
int run_supervisor(LoaderConfig& cfg) {
  if (auto t = TrustStore::load(cfg.trust); !t.ok()) return fail(t.error());  // fail before forking
  const std::string no_exec = exec_works();  // before any thread starts
  auto access = load_access(cfg);
  if (!access.ok()) return fail(access.error());
  auto node_stats = create_shared_memory(cfg);
  if (!node_stats.ok()) return fail(node_stats.error());
  int metrics_fd = -1;
  std::string metrics_at;
  if (!cfg.metrics.empty()) {
    auto m = bind_metrics(cfg.metrics, cfg.metrics_any_address, &metrics_at);
    if (!m.ok()) return fail(m.error());
    metrics_fd = *m;
  }
  SupervisorOptions so;
  if (auto s = choose_door(cfg, *access, so); !s.ok()) return fail(s.error());
  // Without trusted-network no UCX listener holds the listen port: the supervisor does
  // (bound, never listening: a connection to it is refused), so that the loader's name,
  // and its door's, stays its own across restarts, port 0 included.
  PortHold hold;
  if (!cfg.trusted_network) {
    auto h = PortHold::bind(cfg.listen);
    if (!h.ok()) return fail(h.error());
    hold = std::move(*h);
    cfg.listen = hold.address();
  }
  // Tenants (per-key): each route goes to its tenant's workers, started on its first
  // connection (tenants.h); prepare() makes a tenant's supervision once everything below is set.
  std::unique_ptr<SharedTenancy> tenancy;
  if (cfg.tenants == "per-key") {
    auto t = Tenancy::per_key(*access->clients);
    if (!t.ok()) return fail(t.error());
    tenancy = std::make_unique<SharedTenancy>(std::move(*t));
  }
  std::unique_ptr<DoorKeeper> door;
  std::optional<TenantUsers> users;
  if (cfg.tenant_users == "dynamic") users.emplace(cfg.cache.empty() ? std::string() : cfg.cache + "/tenants");
  std::unique_ptr<TlsKeeper> tls_keeper;
  Tenants tenants(
      [&](const std::string& tenant) {
        return prepare_tenant(cfg, *access, *tenancy->get(), users ? &*users : nullptr, so, door.get(), tenant);
      },
      [&tls_keeper](const std::string& tenant, const std::string&) {  // why: for the log, not for strangers
        if (tls_keeper) tls_keeper->turn_away(tenant, "its workers could not start");
      });
  TlsKeeper::Route route;
  std::function<void(const std::string&)> wanted;
  if (tenancy) {
    route = [&tenancy](const door::Route& r) { return tenancy->get()->route(r.key, r.tenant); };
    wanted = [&tenants](const std::string& t) { tenants.want(t); };
  }
  // The TLS port is the supervisor's from now until the loader stops: a connection is
  // never refused while it runs, even between workers (tls_keeper.h).
  if (!cfg.tls_listen.empty()) {
    auto k = TlsKeeper::open(cfg.tls_listen, tls_peers(cfg), access->node_key->public_key().raw,
                             [](const std::string& line) { log_line(line); }, route, wanted);
    if (!k.ok()) return fail(k.error());
    tls_keeper = std::move(*k);
    cfg.tls_listen = tls_keeper->address();
    so.tls_keeper = tls_keeper.get();
  }
  so.listen = Listen{cfg.listen, cfg.tls_listen};
  so.ucx_what = ucx_what(cfg, so.door);
  so.ready_file = cfg.ready_file;
  so.kernel_timeout_s = cfg.timeout_s;
  so.standby = cfg.standby;
  log_directly();
  if (auto s = start_log_copier(cfg.log, cfg.log_max_size); !s.ok()) return fail(s.error());
  if (!no_exec.empty()) log_line("warning: workers start by fork, not exec (" + no_exec + "): they share the supervisor's address layout");
  pid_t metrics_pid = -1;
  if (metrics_fd >= 0) {
    auto p = start_metrics(cfg, access->user, metrics_fd, cfg.node_stats_fd);
    ::close(metrics_fd);
    if (!p.ok()) return fail(p.error());
    metrics_pid = *p;
  }
  hook_supervisor(so, *access, **node_stats);
  so.node_key = access->node_key->public_key().raw;
  if (metrics_pid > 0) so.started += "; metrics at " + metrics_at + " (GET /metrics, unauthenticated)";
  Result<int> rc = 0;
  if (tenancy) {
    rc = serve_tenants(cfg, so, *tenancy, tenants, door, route, wanted);
  } else {
    const WorkerAccess wa{access->user, access->clients, access->node_key->public_key(), {}};
    const auto [worker, compiler] = worker_mains(so, cfg, wa);
    rc = supervise(so, g_stop, worker, compiler);
  }
  stop_metrics(metrics_pid, cfg);
  close_log();
  return rc.ok() ? *rc : fail(rc.error());
}

// --exec: the one client on stdin/stdout, served by an engine in this process (sandboxed,
// its compile service a child) until its input ends. Returns main's exit code.
int run_exec(const LoaderConfig& cfg) {
  // A crashing kernel ends this process with its signal, which the client reports; UCX's
  // (and sanitizers') own fault handlers would turn it into a backtrace and another exit.
  for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE}) ::signal(sig, SIG_DFL);
  auto log = [verbose = cfg.verbose](std::string_view line) {
    if (verbose) log_line(line);
  };
  if (auto s = prepare_cache(cfg.cache, std::nullopt); !s.ok()) return fail(s.error());
  auto compiler_fd = start_compiler(cfg);
  if (!compiler_fd.ok()) return fail(compiler_fd.error());
  // It ends with the client that started it, however that one ends (killed too): its end of
  // the pipe hangs up, and a kernel still running here must not outlive it. Started after
  // the compile service's fork: a thread being made while the process forks can leave the
  // child with a lock it never gets (under ASan: the service hangs in its allocator).
  std::thread([] {
    pollfd p{0, 0, 0};
    while (::poll(&p, 1, -1) < 0 && errno == EINTR) {
    }
    if (p.revents & (POLLHUP | POLLERR)) ::_exit(1);
  }).detach();
  const sandbox::Options box = sandbox_options(cfg, std::nullopt);
  if (auto s = sandbox::prepare(box, {0, *compiler_fd}); !s.ok()) return fail(s.error());  // stdin: the client
  auto engine = make_engine(cfg, log, compiler::remote(*compiler_fd, timing::kCompileLimit));
  if (!engine.ok()) return fail(engine.error());
  if (auto s = sandbox::lock_down(box); !s.ok()) return fail(s.error());
  Handler handler(**engine, cfg.max_input, log, 1000000, cfg.log_every_run);
  const int rc = serve_stdio(handler);
  handler.flush_runs(true);
  flush_log();
#if defined(__SANITIZE_ADDRESS__)
  // LeakSanitizer's exit-time check stops threads with clone and ptrace, which the filters
  // refuse once they are on: leave without it (the engine's tests run it).
  if (box.syscall_filter) {
    flush_log();
    std::fflush(nullptr);
    _exit(rc);
  }
#endif
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  OPENSSL_init_crypto(OPENSSL_INIT_NO_LOAD_CONFIG, nullptr);
  // UCX writes a warning per failed connection, unlimited: a flood of connections would fill
  // the log. Its errors stay; an admin who wants its warnings sets UCX_LOG_LEVEL.
  ::setenv("UCX_LOG_LEVEL", "error", 0);
  // Every connection holds a descriptor (UCX's, the door's lifelines, TLS): the soft limit,
  // often 1024, goes up to the hard one (at most 65536), as services' do, so that a flood of
  // connections meets the per-host limits before the descriptor limit stops new ones.
  if (rlimit r{}; ::getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < std::min<rlim_t>(r.rlim_max, 65536)) {
    r.rlim_cur = std::min<rlim_t>(r.rlim_max, 65536);
    (void)::setrlimit(RLIMIT_NOFILE, &r);
  }
  if (std::getenv("XCARGO_EXEC_PROBE")) return 0;  // exec_works' child
  // A worker ends as its forked form did, by _exit: no exit-time handlers (LeakSanitizer's
  // check would stop threads with clone and ptrace, which its filters refuse).
  if (const char* start = std::getenv("XCARGO_WORKER_START")) {
    const int rc = run_started_worker(start);
    flush_log();
    std::fflush(nullptr);
    _exit(rc);
  }
  if (const char* start = std::getenv("XCARGO_COMPILER_START")) {
    const int rc = run_started_compiler(start);
    flush_log();
    std::fflush(nullptr);
    _exit(rc);
  }
  g_exe_fd = ::open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
  LoaderConfig cfg;
  bool exec = false;
  if (auto done = read_command_line(argc, argv, cfg, exec)) return *done;
  set_log_json(cfg.log_format == "json");
  if (auto s = apply_cluster(cfg, exec); !s.ok()) return fail(s.error());
  if (auto s = check_serving(cfg, exec); !s.ok()) return fail(s.error());

  struct sigaction sa {};
  sa.sa_handler = exec ? on_exec_signal : on_signal;  // no SA_RESTART: waitpid returns on a signal
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  if (!exec) return run_supervisor(cfg);
  return run_exec(cfg);
}
