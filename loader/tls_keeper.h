// The TLS front door's listening socket, kept by the supervisor: it listens from the loader's
// start to its stop, across worker restarts, so a connection to a running loader is never
// refused (a refused one means no loader: clients fail at once). It reads each connection's
// route (its first frame, before TLS: wire-protocol.md 2.3), then passes the connection to the
// serving worker over that worker's channel; between workers they wait with the keeper (at
// most 512), then in the socket's backlog. No process that runs kernels holds the listening
// socket. It also makes the worker's connections to the cluster's TLS peers (a `dial` on the
// channel, in door_channel.h's messages), each sending this node's route first: the process
// that runs kernels opens no socket of its own, and a dial reaches only the peers the keeper
// was given.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "net/door.h"
#include "xcargo/error.h"

namespace xcargo::loader {

class TlsKeeper {
public:
  // Binds and listens on HOST:PORT (port 0: a free one) and starts the keeper's thread.
  // peers: the HOST:PORT of each TLS front door a worker may ask it to dial (the cluster's
  // tls:// nodes); a dial of any other address is refused. Errors name the address and say
  // whether another process has it. node_key: this node's public key, its dials' route.
  // route: the tenant a connection's route goes to, or why it is refused (the connection is
  // then closed); unset, every route goes to tenant "". wanted: told, from the keeper's
  // thread, that a connection waits for a tenant no worker serves (maybe again, for each).
  using Route = std::function<Result<std::string>(const door::Route&)>;
  [[nodiscard]] static Result<std::unique_ptr<TlsKeeper>> open(const std::string& host_port, std::vector<std::string> peers,
                                                               const std::array<uint8_t, 32>& node_key,
                                                               std::function<void(const std::string&)> log, Route route = {},
                                                               std::function<void(const std::string&)> wanted = {});
  ~TlsKeeper();  // stops the thread, closes the socket (connections waiting in it are reset)

  // Connections still sending their route, at most: past it a new connection takes the
  // place of the one that has waited longest. A client sends its route at once, in its first
  // write: only a connection that holds it back loses its place, and connections that say
  // nothing cannot keep others out.
  static constexpr size_t kMaxRouting = 256;

  // HOST:PORT as bound (port 0 resolved).
  const std::string& address() const;
  // The worker that takes `tenant`'s connections from now on, by the keeper's end of its channel (a
  // SOCK_SEQPACKET socket: one connection's descriptor per packet, its text "c"; a dial's
  // answer is a door_channel message, `dialed` with the connection's descriptor (connected,
  // non-blocking, its route sent) or `dial_failed` with why); -1: none,
  // between workers. Once it returns, no connection goes to the one before. The keeper
  // keeps a copy of the channel; the caller's stays its own.
  void serve(const std::string& tenant, int channel_fd);
  // The connections waiting for `tenant`'s worker are answered `refused` (why, in place of
  // TLS: the client reports it and may try later) and closed; for a tenant whose workers
  // cannot start. Any thread. Routed connections wait at most 10 s in any case, and past
  // kMaxHeld the one that has waited longest is closed: connections for a tenant without a
  // worker cannot keep others' clients out.
  void turn_away(const std::string& tenant, const std::string& why);
  // Connections passed to workers so far, and dials made for them (for tests).
  uint64_t passed() const;
  uint64_t dialed() const;

  struct Impl;

private:
  explicit TlsKeeper(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace xcargo::loader
