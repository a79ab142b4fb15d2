// SelfProbe: the worker's check that a new client can still reach it and be answered.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "net/door.h"
#include "net/ucx.h"
#include "xcargo/error.h"
#include "wire/wire.h"

namespace xcargo::loader {

// A worker can keep serving the clients it has while no new one reaches it:
// - UCX's shared-memory transports (posix, sysv) give a worker one receive FIFO that every
//   local peer writes into, in order. A peer that dies between taking a slot and filling it
//   (a client killed in the middle of a send), or a process that writes over the FIFO,
//   stops delivery for everyone behind it, for good (UCX 1.13 has no recovery).
// - A kernel can close the worker's listening sockets (every socket in SO_ACCEPTCONN state),
//   leaving the node deaf with its worker never replaced (guarded by escape_deafen in
//   tests/kernels/adversary.c, run by tests/e2e/adversary_test.sh).
// The probe is a client inside the worker, with its own UCX context and the same transports
// as a local client: every `interval` it makes a new connection to the worker's listener
// (or, without one, to its address, as a same-host client does), says hello and closes it. No hello answered for `deadline` while the server kept
// progressing means new clients cannot be served; the server then restarts the worker.
class SelfProbe {
public:
  struct Options {
    std::string address;  // the server's HOST:PORT (a wildcard host is reached on 127.0.0.1); or aim() later
    std::chrono::milliseconds interval{2000};
    // The first probe after aim(): soon, not an interval later, so that a worker deaf from
    // its start is found sooner and the probe's own UCX resources (a keepalive timer over
    // shared memory, say) exist before the worker's first second of service is over.
    std::chrono::milliseconds first_after{200};
    std::chrono::milliseconds deadline{10000};
    // Progress calls of the server's worker during `deadline` without which unanswered
    // hellos prove nothing (every executor busy in a kernel: nobody reads).
    uint64_t min_progress = 20;
    // UCX's network transports on the loopback device only (UcxWorker::create), as the
    // server's own are without trusted-network.
    bool loopback_only = true;
    // The probe's endpoints may use shared memory (UcxWorker::create): to a worker with no
    // listener, reached by its address as a same-host client reaches it.
    bool shm = false;
  };

  // Creates the probe's own UCX context. Call before the sandbox locks down: the context
  // maps shared memory.
  static Result<std::unique_ptr<SelfProbe>> start(const Options& options);
  // The server's address, once it listens (a standby worker listens when it takes over):
  // run() probes it from then on. Call once, from any thread.
  void aim(const std::string& address);
  // Or, for a worker with no UCX listener, its UCX address: each probe then connects by it,
  // and presents `ticket` first (the `door` message) as a same-host client presents the
  // keeper's. Call once, as aim().
  void aim_at_worker(ByteView worker_address, const door::Ticket& ticket);
  ~SelfProbe();

  // Whether a hello came from this probe (its nonce, random per worker): the server answers
  // it even on a connection it refused for crowding, and does not log it.
  bool is_probe(const wire::Hello& hello) const { return hello.nonce == nonce_; }

  // The probe's thread: until quit, probes every interval. progress counts the server's
  // progress calls. on_wedged(why) runs once, when new clients could not be served.
  void run(const std::atomic<bool>& quit, const std::atomic<uint64_t>& progress,
           const std::function<void(const std::string&)>& on_wedged);
  // Makes run() look at quit now (from another thread).
  void wake() { w_->wake(); }

private:
  SelfProbe() = default;
  bool connect();
  void close();
  // One connection, one hello: true if it was answered within the interval.
  bool greet_once(const std::atomic<bool>& quit);

  Options opt_;
  std::mutex aim_mu_;
  std::string aimed_;                    // from aim(), for run()'s thread
  Bytes worker_address_;                 // from aim_at_worker(), read by run()'s thread once have_address_
  door::Ticket ticket_{};
  std::atomic<bool> have_address_{false};
  std::unique_ptr<net::UcxWorker> w_;
  ucp_ep_h ep_ = nullptr;
  wire::Nonce nonce_{};
  Bytes hello_;                   // encoded once: the same every time
  std::atomic<bool> lost_{false};  // the connection failed
  bool answered_ = false;
};

}  // namespace xcargo::loader
