// The TLS transport of the client library (tls_client.cpp), which connect() picks for
// "tls://HOST:PORT". Internal to libcargo/client.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "xcargo/client.h"

namespace xcargo::client {

// How a try at a connection failed, beyond its error: connect() decides from it whether to
// try again, and which error to report.
struct TryFailure {
  bool refused = false;    // nothing listens at the address
  bool refused_for_good = false;  // ... and nothing will soon: the address is a same-host door or a front door
  bool timed_out = false;  // its time (timeout_ms) ran out
  bool not_a_loader = false;  // the peer answered, but not in TLS 1.3: no later try would differ
};
// One try at a connection, handshakes included, within timeout_ms; on failure, *how says why.
using Attempt = std::function<Result<std::unique_ptr<Connection>>(int timeout_ms, TryFailure* how)>;

// Tries at the front door of a node at HOST:PORT (no scheme) over TLS 1.3, expecting the
// node key options.node_key, else the one the known-nodes file pins for that address (an
// error now if there is none). options.identity_key is the identity, already loaded.
Result<Attempt> tls_attempt(const std::string& host_port, const ConnectOptions& options);

}  // namespace xcargo::client
