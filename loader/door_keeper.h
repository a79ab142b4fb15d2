// The same-host door (wire protocol 2.4), kept by the supervisor: no process that runs
// kernels holds a socket that others connect to, nor a connection to a process outside the
// loader that it could pass descriptors through. The keeper reads each connection's route,
// then offers a connection of the loader's own user its serving worker's UCX address and a
// ticket (telling the worker the ticket first); it refuses other users without reading a
// byte, holds every lifeline, and opens peers' doors for its worker.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "net/door.h"
#include "xcargo/error.h"

namespace xcargo::loader {

class DoorKeeper {
public:
  struct Options {
    std::string host_port;     // the loader's bound listen address: the door's name
    std::string other_users;   // the refusal's hint for other users (the TLS front door, if any)
    std::array<uint8_t, 32> node_key{};  // this node's public key: the route of the peers' doors it opens
    // The tenant a route goes to, or why it is refused (unset: every route goes to tenant "").
    std::function<Result<std::string>(const door::Route&)> route;
    // Told, from the keeper's thread, that a connection waits for a tenant no worker serves
    // (maybe again, for each such connection): its supervisor should start one. May be unset.
    std::function<void(const std::string& tenant)> wanted;
    std::function<void(const std::string&)> log;
  };
  // Opens the door (refusing if another loader has it) and starts the keeper's thread.
  [[nodiscard]] static Result<std::unique_ptr<DoorKeeper>> open(Options options);
  ~DoorKeeper();  // closes the door and every lifeline

  // The worker that serves `tenant` from now on, by the keeper's end of its channel (-1:
  // none, between workers); connections routed to it wait (up to the client's limit) for the
  // new one's address. The one before keeps its clients (it answers what they have in
  // flight) until ended(). Its dials of peers' doors route for `tenant`.
  void serve(const std::string& tenant, int channel_fd);
  // The worker with this channel (the keeper's end, any copy) is gone: its clients'
  // lifelines close, so they know at once (shared memory would tell them only after UCX's
  // keepalive, about 20 s).
  void ended(int channel_fd);

  struct Impl;

private:
  explicit DoorKeeper(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace xcargo::loader
