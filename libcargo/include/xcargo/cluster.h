// A cluster file: the nodes of a cluster of loaders, by id and address (YAML).
//
//   nodes:
//     - id: 0
//       address: 127.0.0.1:7400
//     - id: 1
//       address: 127.0.0.1:7401
//
// Ids are 0 to N-1, each once (what xc_node_id() and xc_node_count() return); addresses
// are HOST:PORT (UCX) or tls://HOST:PORT (the node's TLS front door, which nodes then
// forward through too). Loaders read it to reach each other; `xcargo run --cluster` to pick a node.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "xcargo/error.h"

namespace xcargo {

inline constexpr uint32_t kMaxClusterNodes = 4096;

// A node's address split at its scheme, which names the transport that reaches it: tls://
// (the node's TLS front door), ucx:// (UCX, on a network whose every host is trusted), none
// (HOST:PORT: client::route_of decides), or another, which no node serves.
struct NodeAddress {
  enum class Scheme { none, tls, ucx, other } scheme = Scheme::none;
  std::string host_port;  // the address without its scheme ("other": the whole address)
};
inline NodeAddress split_scheme(std::string_view address) {
  if (address.substr(0, 6) == "tls://") return {NodeAddress::Scheme::tls, std::string(address.substr(6))};
  if (address.substr(0, 6) == "ucx://") return {NodeAddress::Scheme::ucx, std::string(address.substr(6))};
  if (address.find("://") != std::string_view::npos) return {NodeAddress::Scheme::other, std::string(address)};
  return {NodeAddress::Scheme::none, std::string(address)};
}
inline constexpr uint64_t kMaxClusterFileSize = 1 << 20;

struct ClusterNode {
  uint32_t id = 0;
  std::string address;  // HOST:PORT, tls://HOST:PORT or ucx://HOST:PORT (client::route_of)
};

struct Cluster {
  std::vector<ClusterNode> nodes;  // ordered by id: nodes[i].id == i
  uint32_t size() const { return uint32_t(nodes.size()); }
  // nullptr when id is not a node of this cluster.
  const ClusterNode* find(uint32_t id) const { return id < nodes.size() ? &nodes[id] : nullptr; }
};

// origin names the text in error messages (a path).
Result<Cluster> parse_cluster(std::string_view yaml, const std::string& origin);
Result<Cluster> read_cluster_file(const std::string& path);

}  // namespace xcargo
