// Parses and checks cluster files (xcargo/cluster.h).
#include "xcargo/cluster.h"

#include <yaml-cpp/yaml.h>

#include <charconv>

#include "xcargo/file.h"

namespace xcargo {

namespace {

// HOST:PORT, tls://HOST:PORT (the node's TLS front door) or ucx://HOST:PORT (UCX on a
// network whose every host is trusted).
bool is_host_port(const std::string& address) {
  const NodeAddress a = split_scheme(address);
  if (a.scheme == NodeAddress::Scheme::other) return false;
  const std::string& s = a.host_port;
  const auto colon = s.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == s.size() || s.size() > 300) return false;
  unsigned port = 0;
  auto [end, ec] = std::from_chars(s.data() + colon + 1, s.data() + s.size(), port);
  return ec == std::errc() && end == s.data() + s.size() && port <= 65535;
}

}  // namespace

Result<Cluster> parse_cluster(std::string_view yaml, const std::string& origin) {
  auto bad = [&](const std::string& what) {
    return Error(Errc::invalid_argument, origin + ": " + what)
        .hint("a cluster file is 'nodes:' followed by '- id: N' and 'address: HOST:PORT' (or tls://HOST:PORT, ucx://HOST:PORT) for N = 0, 1, ...");
  };
  if (yaml.size() > kMaxClusterFileSize) return bad("over " + std::to_string(kMaxClusterFileSize) + " bytes");
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    return bad("not YAML: " + std::string(e.what()));
  }
  if (!root.IsMap()) return bad("not a mapping with 'nodes'");
  Cluster c;
  for (const auto& kv : root) {
    const std::string key = kv.first.as<std::string>("");
    if (key != "nodes") return bad("unknown setting '" + key + "'");
    const YAML::Node& list = kv.second;
    if (!list.IsSequence()) return bad("'nodes' must be a list");
    if (list.size() == 0 || list.size() > kMaxClusterNodes)
      return bad("a cluster has 1 to " + std::to_string(kMaxClusterNodes) + " nodes, not " + std::to_string(list.size()));
    c.nodes.resize(list.size());
    std::vector<bool> seen(list.size());
    for (const auto& n : list) {
      if (!n.IsMap()) return bad("each node must be a mapping with 'id' and 'address'");
      uint32_t id = 0;
      std::string address;
      bool has_id = false;
      for (const auto& f : n) {
        const std::string k = f.first.as<std::string>("");
        try {
          if (k == "id") id = f.second.as<uint32_t>(), has_id = true;
          else if (k == "address") address = f.second.as<std::string>();
          else return bad("unknown node setting '" + k + "'");
        } catch (const YAML::Exception&) {
          return bad("node setting '" + k + "' has the wrong type");
        }
      }
      if (!has_id) return bad("a node has no 'id'");
      if (id >= list.size()) return bad("node id " + std::to_string(id) + " is not below the node count " + std::to_string(list.size()));
      if (seen[id]) return bad("node id " + std::to_string(id) + " appears twice");
      if (!is_host_port(address)) return bad("node " + std::to_string(id) + ": address '" + address + "' is not HOST:PORT");
      seen[id] = true;
      c.nodes[id] = {id, address};
    }
  }
  if (c.nodes.empty()) return bad("no 'nodes'");
  return c;
}

Result<Cluster> read_cluster_file(const std::string& path) {
  auto text = read_file(path, kMaxClusterFileSize);
  if (!text.ok()) return text.take_error();
  return parse_cluster(std::string_view(reinterpret_cast<const char*>(text->data()), text->size()), path);
}

}  // namespace xcargo
