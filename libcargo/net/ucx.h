// The one binding to UCX's ucp API, shared by the client library, the loader and the tools:
// the function table (loaded with dlopen on first use), context and worker set-up,
// HOST:PORT parsing, blocking until the worker has events, listening and connecting.
#pragma once

#include <netinet/in.h>
#include <ucp/api/ucp.h>
#include <ucs/config/global_opts.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "xcargo/error.h"
#include "xcargo/types.h"

namespace xcargo::net {

// The UCX functions xcargo calls, loaded with dlopen on first use: programs that never
// connect anywhere (`xcargo verify`, `xcargo build`) do not pay for loading UCX (~1.3 ms).
#define XC_UCX_FUNCTIONS(X)                                                                                       \
  X(ucp_config_read) X(ucp_config_modify) X(ucp_config_release) X(ucp_init_version) X(ucp_cleanup)                \
  X(ucp_worker_create) X(ucp_worker_destroy) X(ucp_worker_get_efd) X(ucp_worker_arm) X(ucp_worker_progress)       \
  X(ucp_worker_set_am_recv_handler) X(ucp_ep_create) X(ucp_ep_close_nbx) X(ucp_am_send_nbx)                       \
  X(ucp_am_recv_data_nbx) X(ucp_request_free) X(ucp_request_cancel) X(ucp_request_check_status)                   \
  X(ucp_listener_create) X(ucp_listener_destroy) X(ucp_listener_query) X(ucp_conn_request_query)                  \
  X(ucp_worker_get_address) X(ucp_worker_release_address) X(ucp_ep_rkey_unpack) X(ucp_rkey_destroy) X(ucp_get_nbx) \
  X(ucp_context_print_info) X(ucs_status_string) X(ucp_mem_map) X(ucp_mem_unmap)        \
  X(ucp_rkey_pack) X(ucp_rkey_buffer_release) X(ucs_global_opts_set_value) X(ucs_global_opts_get_value)

struct UcxApi {
#define XC_UCX_MEMBER(name) decltype(&::name) name;
  XC_UCX_FUNCTIONS(XC_UCX_MEMBER)
#undef XC_UCX_MEMBER
};

// The loaded functions, or nullptr (with *why set) when UCX's libraries cannot be loaded.
const UcxApi* ucx_api(const char** why = nullptr);

// The table once loaded: UCX-> reads it without a call (a polling loop calls through the table
// millions of times a second).
extern std::atomic<const UcxApi*> ucx_loaded;
inline const UcxApi* ucx_table() {
  const UcxApi* api = ucx_loaded.load(std::memory_order_acquire);
  return api ? api : ucx_api();
}

// Sets UCX's log level for this process unless the user chose one with UCX_LOG_LEVEL.
// Works whether or not UCX is already loaded (a program may link it directly): setting the
// variable instead would be read too late then, and UCX would warn that it went unused.
void default_ucx_log_level(const char* level);

}  // namespace xcargo::net

// Calls through the table: UCX->ucp_worker_progress(w). Only after UcxWorker::create()
// succeeded, which checks that the table loaded.
#define UCX (::xcargo::net::ucx_table())

namespace xcargo::net {

// The port loaders listen on when an address names none.
inline constexpr uint16_t kDefaultPort = 7400;
// "HOST:PORT" or "HOST" (kDefaultPort) to a socket address; a host name resolves to IPv4.
// "[IPv6]:PORT" is refused with a reason: UCX 1.13 does not work over IPv6 (README).
Result<sockaddr_storage> parse_host_port(const std::string& host_port, socklen_t* len = nullptr);
// Whether an IPv4 address is this host's: loopback, or one of its interfaces'. Only then can
// a node's shared-memory lane be attached (and the lane's nonce proves it was the node's).
bool on_this_host(const sockaddr_storage& a);
// Whether an address is a loopback one (127.0.0.0/8): only processes of this host reach it.
bool is_loopback(const sockaddr_storage& a);
// "1.2.3.4:PORT", or "[IPv6]:PORT".
std::string to_host_port(const sockaddr* addr);

// A ucp context and one worker with Active Messages and wake-up support, for use by one
// thread at a time (the loader hands the worker from thread to thread, never shares it).
class UcxWorker {
public:
  // listener: the worker will listen, and should rebind its port at once after a restart.
  // rma: the context offers one-sided access (UCP_FEATURE_RMA). Off, UCX serves no peer's
  // GET or PUT to this process's memory (but see loader/SECURITY.md for raw tcp).
  // loopback_only: unless UCX_NET_DEVICES names devices, UCX's network transports use the
  // loopback device alone, so the ports UCX opens for them take no connection from another
  // host (UCX trusts every peer that reaches them).
  // shm: endpoints (all of which detect peer failure) may use shared memory, when UCX_TLS
  // lets UCX use it; off, they keep to network transports (a peer of another user could not
  // attach this process's segments, nor this process its peer's).
  static Result<std::unique_ptr<UcxWorker>> create(bool listener = false, bool rma = false, bool loopback_only = false,
                                                   bool shm = true);
  ~UcxWorker();
  ucp_context_h context() const { return context_; }
  ucp_worker_h worker() const { return worker_; }
  // Progresses until nothing is left to do, then blocks until the worker has an event or
  // timeout_ms passes (-1: no limit). Returns false if interrupted by wake().
  bool progress_or_wait(int timeout_ms);
  // Makes a progress_or_wait() in another thread return. Safe from any thread; it touches
  // only an eventfd, never the UCX worker.
  void wake();
  // progress_or_wait() also returns when fd is readable (another transport's events, such
  // as an epoll descriptor of its own). The caller keeps fd open while this worker lives.
  [[nodiscard]] Status watch(int fd);
  void unwatch(int fd);
  // This worker's UCX address, for peers to create endpoints to it (ucp_worker_get_address).
  Result<Bytes> address() const;
  // The transports the context may use ("tcp", "posix", "rc_mlx5", ...), once each.
  std::vector<std::string> transports() const;

private:
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  int efd_ = -1;
  int epfd_ = -1;
  int wake_fd_ = -1;
};

Error ucx_error(const std::string& what, ucs_status_t status);

// Whether a UCX transport checks memory keys in hardware (InfiniBand/RoCE: rc, dc, ud). The
// others (tcp, posix, sysv, cma, ...) emulate one-sided access in software and serve a GET
// or PUT at any address a peer names.
bool enforces_memory_keys(const std::string& transport);

// A UCX_TLS value (nullptr or "": UCX's default, all) without the transports in `drop`.
// Aliases are expanded first ("shm" and "sm": posix, sysv, cma, knem, xpmem; "mm": posix,
// sysv, xpmem; "all": everything, which becomes an exclusion list); an exclusion list
// ("^...") gains them. An error if nothing would be left.
[[nodiscard]] Result<std::string> tls_without(const char* tls, const std::vector<std::string>& drop);

// An endpoint to a UCX listener at HOST:PORT (client-server connection establishment) with
// peer failure detection: on_error(arg, ep, status), if given, runs when the peer goes away.
// The connection completes in the background; sends wait for it.
Result<ucp_ep_h> connect_ep(ucp_worker_h worker, const std::string& host_port, ucp_err_handler_cb_t on_error = nullptr,
                            void* arg = nullptr);

// An endpoint to a worker by its UCX address (a same-host door's offer, wire-protocol.md 2.4),
// with peer failure detection as for connect_ep.
Result<ucp_ep_h> connect_address(ucp_worker_h worker, ByteView address, ucp_err_handler_cb_t on_error = nullptr,
                                 void* arg = nullptr);
// Claims a door connection (wire-protocol.md 2.4): the `door` message with the offer's ticket,
// sent on the endpoint connect_address just made, before anything else (UCX keeps an
// endpoint's order). The ticket's bytes must stay valid until the send completes: the
// caller keeps them while the endpoint lives.
Status send_claim(ucp_ep_h ep, ByteView ticket);
// Whether UCX_TLS (when set) lets UCX use a shared-memory transport.
bool shm_enabled();
// Whether a UCX_TLS value (null: unset) lets UCX use System V shared memory, the one a
// loader's worker uses (posix needs what its sandbox refuses): what the same-host door
// offers, so both of its ends must have it.
bool sysv_enabled(const char* ucx_tls);
// Whether this process reaches a loader at A through its same-host door (wire-protocol.md
// 2.4): A is a loopback address and UCX_TLS lets UCX use sysv.
bool door_route(const sockaddr_storage& a);

// A UCX listener at HOST:PORT: on_conn(request, arg) runs for each connection request, and
// usually accepts it with accept_ep. *bound receives the HOST:PORT it listens on (port 0
// resolved).
Result<ucp_listener_h> listen(ucp_worker_h worker, const std::string& host_port, ucp_listener_conn_callback_t on_conn,
                              void* arg, std::string* bound = nullptr);
// Accepts a connection request, with peer failure detection as for connect_ep.
Result<ucp_ep_h> accept_ep(ucp_worker_h worker, ucp_conn_request_h request, ucp_err_handler_cb_t on_error = nullptr,
                           void* arg = nullptr);

}  // namespace xcargo::net
