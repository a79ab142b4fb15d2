// The metrics endpoint: GET /metrics over HTTP on a Unix socket or a loopback port, served by
// a process of its own from the node's counters, so that a scrape never waits on a worker.
#pragma once

#include <atomic>
#include <string>

#include "stats/node_stats.h"
#include "xcargo/error.h"

namespace xcargo::loader {

inline constexpr int kMaxMetricsConnections = 8;   // served at once; more wait in the backlog
inline constexpr int kMetricsDeadlineMs = 5000;    // a connection's whole life: request and response

// A listening socket for `--metrics ADDR`: unix:/PATH (made with mode 0660, replacing a stale
// socket; refused if a loader still serves it) or HOST:PORT. Unless any_address, HOST must be
// a loopback address: anyone who reaches the port reads the counts.
[[nodiscard]] Result<int> bind_metrics(const std::string& address, bool any_address, std::string* described);

// Serves listen_fd until `stop` (polled at least every 200 ms); answers each connection with
// one response and closes it. Returns 0, or 1 if the socket fails.
int serve_metrics(int listen_fd, const NodeStats& stats, const std::atomic<bool>& stop);

}  // namespace xcargo::loader
