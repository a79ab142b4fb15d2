// Transport: what the server's parts (server_impl.h) need from a transport that carries
// connections: sends to clients and to peer nodes, closes, polling for events.
// UCX (ucx_server.cpp) and the TLS front door (server_tls.cpp) implement it, and the server's
// unit tests a fake. A message a transport receives goes to the server's intake from inside
// poll() or Sleeper::wait(), on the leader's thread, as UCX's callbacks do.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "server/connections.h"
#include "server/endpoint.h"
#include "server/reply.h"

namespace xcargo::loader {

class Transport {
public:
  using Failed = std::function<void(const std::string& why)>;
  virtual ~Transport() = default;

  // Why `size` more bytes of replies to client c on ep would pass what a client may leave
  // unread (in_flight.h); empty if they would not.
  virtual std::string unread_over_limit(Ep ep, const Client& c, uint64_t size) const = 0;
  // Sends a reply to a client on ep. unread: the client, whose unread replies it counts
  // among until the transport has taken it; null for the worker's own probe.
  virtual void send(Ep ep, Reply&& r, Client* unread) = 0;
  // Sends a message to a peer node on ep, which answers on this connection; on_fail if it
  // cannot be delivered (the peer went away).
  virtual void send_peer(Ep ep, Reply&& r, Failed on_fail) = 0;
  virtual void close(Ep ep) = 0;
  // A connection to a peer whose send failed: closed once the transport has nothing more to
  // report about it.
  virtual void drop_failed(Ep ep) { close(ep); }

  // One look for events (messages in, sends completed): whether anything happened.
  virtual bool poll() = 0;
  // Whether replies still wait for the transport to take them.
  virtual bool sending() const = 0;
  // Timed duties (handshakes late, transfers stalled, credentials to renew). Leader only.
  virtual void sweep(std::chrono::steady_clock::time_point) {}
  // Takes no new connections: a client reconnecting at once must reach the next worker.
  virtual void stop_listening() {}
};

// Where the idle leader sleeps: UCX's worker, which also wakes for the front door's
// descriptor (or a test's fake).
class Sleeper {
public:
  virtual ~Sleeper() = default;
  // Polls, then sleeps until an event or ms milliseconds have passed.
  virtual void wait(int ms) = 0;
  // Makes a wait() in another thread return. Any thread.
  virtual void wake() = 0;
};

}  // namespace xcargo::loader
