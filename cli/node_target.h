// Which loader a network verb talks to: --to HOST:PORT, or a private local loader.
#pragma once

#include <memory>
#include <string>

#include "verbs.h"
#include "xcargo/client.h"

namespace xcargo::cli {

// The xcargo-loader beside this xcargo binary, or $XCARGO_LOADER.
std::string local_loader_path();

// --identity KEY, given before or after the verb; empty: the client library's default
// ($XCARGO_IDENTITY, ~/.config/xcargo/identity).
extern std::string g_identity;

// --connect-timeout SECONDS (add_connect_options): how long reaching a node may take,
// handshakes included; a refused connection fails at once whatever it is.
extern double g_connect_timeout_s;
// Adds the options of every verb that connects to nodes (run, push, ls): --connect-timeout.
void add_connect_options(CLI::App& cmd);

// A connection to HOST:PORT as this invocation's identity, within --connect-timeout, with a
// warning on stderr when the node serves anyone unauthenticated.
Result<std::unique_ptr<client::Connection>> connect_node(const std::string& host_port);

// --to HOST:PORT: a UCX connection; empty: a private local loader trusting `trust`.
Result<std::unique_ptr<client::Connection>> open_connection(const std::string& to, const std::string& trust,
                                                            const std::string& cache, const std::string& prefer,
                                                            unsigned timeout_s);

// The address of node `id` in a cluster file.
Result<std::string> cluster_node_address(const std::string& cluster_file, uint32_t id);

// Pushes the cargo unless the node has its digest. Refusals keep their kind when they are
// verification failures (exit 1); others become Errc::remote (exit 3).
Result<bool> ensure_loaded(client::Connection& c, ByteView cargo, const Digest& digest);

}  // namespace xcargo::cli
