// The TLS transport of the client library (tls_client.cpp), which connect() picks for
// "tls://HOST:PORT". Internal to libcargo/client.
#pragma once

#include <memory>
#include <string>

#include "xcargo/client.h"

namespace xcargo::client {

// Connects to the front door of a node at HOST:PORT (no scheme) over TLS 1.3, expecting the
// node key options.node_key, else the one the known-nodes file pins for that address.
Result<std::unique_ptr<Connection>> connect_tls(const std::string& host_port, const ConnectOptions& options);

}  // namespace xcargo::client
