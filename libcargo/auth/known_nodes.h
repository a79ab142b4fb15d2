// The node keys a client expects, by address (OpenSSH's known_hosts for xcargo): what a
// client checks a node's TLS identity against (format-spec/wire-protocol.md 2.3). A file of
// lines "HOST:PORT KEY [NAME]", KEY being the second line of the node's .pub file, '#'
// starting a comment; one key per address.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "xcargo/error.h"
#include "xcargo/trust.h"

namespace xcargo::auth {

class KnownNodes {
public:
  struct Node {
    std::string address;  // HOST:PORT as written
    PublicKey key;
    std::string name;  // the rest of its line, or the key's id
    size_t line = 0;   // in the file, for messages
  };
  // A file that does not exist knows no node.
  static Result<KnownNodes> load(const std::string& path);
  static Result<KnownNodes> parse(std::string_view text, const std::string& origin);
  const Node* find(std::string_view address) const;
  const std::vector<Node>& all() const { return nodes_; }

  // Pins address to key in the file at path: appended (the file made 0600, its directory
  // 0700, if new). An address already pinned to another key is an error naming its line.
  static Status add(const std::string& path, const std::string& address, const PublicKey& key, const std::string& name = {});

private:
  std::vector<Node> nodes_;
  std::string origin_;
};

// $XCARGO_KNOWN_NODES, else ~/.config/xcargo/known_nodes (empty without a home).
std::string default_known_nodes_path();

}  // namespace xcargo::auth
