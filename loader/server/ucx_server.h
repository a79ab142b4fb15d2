// The loader worker's network side: a UCX listener, one endpoint per client, requests as
// Active Messages (large data by rendezvous), served by a pool of executor threads that
// take turns leading (see loader/README.md, "Threads"), with kernel crashes and time-outs
// turned into replies before the worker asks to be restarted.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "server/auth_gate.h"
#include "server/handler.h"
#include "xcargo/cluster.h"
#include "xcargo/error.h"

namespace xcargo::loader {

struct ServerOptions {
  std::string listen;                                // HOST:PORT; port 0 picks a free one
  // Whether UCX listens at `listen`. Off, `listen` only names the loader (the supervisor
  // holds its port; port 0 is not allowed): UCX takes no connection, and its clients and peers on
  // this host come through the same-host door (door_fd) instead.
  bool ucx_listener = true;
  // The TLS front door's HOST:PORT (front_door.h); empty: none. Its connections prove a key
  // in the handshake: an authorized client's, or a cluster node's (AuthGate::admits).
  std::string tls_listen;
  // This worker's end of its channel from the supervisor's TLS keeper (tls_keeper.h), which
  // listens at tls_listen and passes each connection on; -1: this worker listens itself.
  int tls_fd = -1;
  // This worker's end of the channel to the supervisor's same-host door keeper
  // (door_keeper.h); -1: no door.
  int door_fd = -1;
  // Called (by the leader) when that channel ends while this worker serves: it hears of no
  // new same-host client any more, and should end in order so that its standby serves.
  std::function<void()> on_door_lost;
  unsigned executors = 4;                            // threads that can run requests at once
  double timeout_s = 10;                             // per invocation, in seconds
  std::chrono::microseconds promote_after{1000};     // a leader busy this long hands progress on
  bool inline_quick = true;                          // quick kernels run inline (loader/README.md)
  std::chrono::microseconds spin{1000};              // an idle leader polls this long before it sleeps
  uint32_t node_id = 0;
  Cluster cluster;                                   // where xc_forward's nodes are; empty standalone
  // Clients may read regions one-sidedly (ucp_get with the key a region reply carries). Off,
  // the context has no RMA and every read is a region_read the loader bounds-checks.
  bool one_sided_regions = false;
  // The admin's word that every host able to reach this loader is trusted: required for
  // one-sided reads over transports that emulate them in software (loader/SECURITY.md).
  bool trusted_network = false;
  // Who may do what (required: not null). Connections that have not authenticated within
  // auth_deadline are closed.
  const AuthGate* gate = nullptr;
  std::chrono::milliseconds auth_deadline{10000};
  // Whether start() listens; false: listen() does, later (a standby worker, whose port the
  // worker it replaces still holds until it ends).
  bool listen_at_start = true;
  // Runs once a worker that is about to end has closed its listener (its port is free for
  // the next worker), from the thread that ends it.
  std::function<void()> on_port_released;
};

class UcxServer {
public:
  using Log = std::function<void(std::string_view)>;
  // incident: a line for the supervisor's log when the worker asks to be restarted.
  static Result<std::unique_ptr<UcxServer>> start(const ServerOptions& options, Handler& handler, Log log,
                                                  char* incident, size_t incident_size);
  ~UcxServer();

  // Listens on options.listen (start() did unless listen_at_start was false), retrying for
  // up to `wait` while the port is still taken. Before run().
  [[nodiscard]] Status listen(std::chrono::milliseconds wait = std::chrono::milliseconds(0));
  // HOST:PORT, once it listens; the front door's (empty without one).
  std::string address() const;
  std::string tls_address() const;
  // Serves until stop becomes true. After a kernel crash or time-out, once its client has been
  // told, the process ends with _exit(75) instead (threads inside kernels cannot be stopped)
  // and the supervisor starts a new worker.
  void run(const std::atomic<bool>& stop);
  // Starts run()'s other threads (monitor, probe, executors, stop watcher) now, so that the
  // sandbox can refuse new threads afterwards; run() then starts none. Call at most once.
  void start_threads(const std::atomic<bool>& stop);

  // The serving state the server's parts share (server_impl.h): named here for those parts'
  // unit tests, which drive it through a fake transport.
  struct Impl;

private:
  UcxServer();
  std::unique_ptr<Impl> impl_;
};

}  // namespace xcargo::loader
