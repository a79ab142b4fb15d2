// ShmProbe: the worker's check that its shared-memory receive path still delivers messages.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "xcargo/ucx.h"
#include "xcargo/error.h"
#include "xcargo/wire.h"

namespace xcargo::loader {

// UCX's shared-memory transports (posix, sysv) give a worker one receive FIFO that every
// local peer writes into, in order. A peer that dies between taking a slot and filling it (a
// client killed in the middle of a send) stops delivery for everyone behind it, for good:
// the worker still runs and serves tcp, but no message over shared memory reaches it again
// (UCX 1.13 has no recovery). The probe is a connection from inside the worker to its own
// listener over the same transports as a local client, saying hello every `interval`. A
// hello unanswered for `deadline` while the server kept progressing means the path is
// wedged; the server then restarts the worker, which makes new FIFOs.
class ShmProbe {
public:
  struct Options {
    std::string address;  // the server's HOST:PORT (a wildcard host is reached on 127.0.0.1); or aim() later
    std::chrono::milliseconds interval{2000};
    std::chrono::milliseconds deadline{10000};
    // Progress calls of the server's worker during `deadline` without which an unanswered
    // hello proves nothing (every executor busy in a kernel: nobody reads the FIFO).
    uint64_t min_progress = 20;
  };

  // Whether the worker's transports include one the probe watches.
  static bool needed(const std::vector<std::string>& transports);
  // Creates the probe's own UCX context and connects (in the background) to the server, if
  // its address is known. Call before the sandbox locks down: the context maps shared memory.
  static Result<std::unique_ptr<ShmProbe>> start(const Options& options);
  // The server's address, once it listens (a standby worker listens when it takes over):
  // run() connects to it then. Call once, from any thread.
  void aim(const std::string& address);
  ~ShmProbe();

  // Whether a hello came from this probe (its nonce, random per worker): the server keeps
  // that connection open without authentication and does not log it.
  bool is_probe(const wire::Hello& hello) const { return hello.nonce == nonce_; }

  // The probe's thread: until quit, greets the server every interval. progress counts the
  // server's progress calls. on_wedged(why) runs once, when a hello went unanswered.
  void run(const std::atomic<bool>& quit, const std::atomic<uint64_t>& progress,
           const std::function<void(const std::string&)>& on_wedged);
  // Makes run() look at quit now (from another thread).
  void wake() { w_->wake(); }

private:
  ShmProbe() = default;
  bool connect();
  void close();
  bool greet_once(const std::atomic<bool>& quit, const std::atomic<uint64_t>& progress, std::string* why);

  Options opt_;
  std::mutex aim_mu_;
  std::string aimed_;                    // from aim(), for run()'s thread
  std::atomic<bool> have_address_{false};
  std::unique_ptr<net::UcxWorker> w_;
  ucp_ep_h ep_ = nullptr;
  wire::Nonce nonce_{};
  Bytes hello_;                   // encoded once: the same every time
  std::atomic<bool> lost_{false};  // the connection failed: connect again
  bool answered_ = false;
};

}  // namespace xcargo::loader
