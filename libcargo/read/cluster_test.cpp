// Tests of cluster files: a valid one parses; each kind of mistake is refused by name.
#include <catch2/catch.hpp>

#include "xcargo/cluster.h"

using namespace xcargo;

TEST_CASE("a cluster file lists nodes 0 to N-1 by address", "[cluster]") {
  auto c = parse_cluster("nodes:\n  - id: 1\n    address: 127.0.0.1:7401\n  - {id: 0, address: 'host:7400'}\n", "c.yaml");
  REQUIRE(c.ok());
  REQUIRE(c->size() == 2);
  CHECK(c->find(0)->address == "host:7400");
  CHECK(c->find(1)->address == "127.0.0.1:7401");
  auto t = parse_cluster("nodes:\n  - {id: 0, address: 'tls://host:7401'}\n", "t.yaml");
  REQUIRE(t.ok());
  CHECK(t->find(0)->address == "tls://host:7401");
  auto u = parse_cluster("nodes:\n  - {id: 0, address: 'ucx://10.0.0.1:7400'}\n", "t.yaml");
  REQUIRE(u.ok());
  CHECK(u->find(0)->address == "ucx://10.0.0.1:7400");
  CHECK(c->find(2) == nullptr);
}

TEST_CASE("an address's scheme names its transport", "[cluster]") {
  using S = NodeAddress::Scheme;
  CHECK(split_scheme("tls://host:7401").scheme == S::tls);
  CHECK(split_scheme("tls://host:7401").host_port == "host:7401");
  CHECK(split_scheme("ucx://10.0.0.1:7400").scheme == S::ucx);
  CHECK(split_scheme("ucx://10.0.0.1:7400").host_port == "10.0.0.1:7400");
  CHECK(split_scheme("127.0.0.1:7400").scheme == S::none);
  CHECK(split_scheme("127.0.0.1:7400").host_port == "127.0.0.1:7400");
  CHECK(split_scheme("http://host:80").scheme == S::other);
  CHECK(split_scheme("TLS://host:7401").scheme == S::other);  // schemes are lower case
  CHECK(split_scheme("tls:/host:7401").scheme == S::none);    // not a scheme: parse_host_port refuses it
  auto c = parse_cluster("nodes:\n  - {id: 0, address: 'http://host:7400'}\n", "c.yaml");
  CHECK_FALSE(c.ok());
}

TEST_CASE("cluster file mistakes are refused with what is wrong", "[cluster]") {
  auto refused = [](const std::string& yaml, const std::string& why) {
    auto c = parse_cluster(yaml, "c.yaml");
    INFO(yaml);
    REQUIRE_FALSE(c.ok());
    CHECK(c.error().message().find("c.yaml: ") == 0);
    CHECK(c.error().message().find(why) != std::string::npos);
  };
  refused("", "not a mapping");
  refused("nodes: [", "not YAML");
  refused("nodes: 3", "must be a list");
  refused("nodes: []", "1 to 4096 nodes");
  refused("nodes:\n  - {id: 0, address: a:1}\n  - {id: 0, address: b:1}\n", "appears twice");
  refused("nodes:\n  - {id: 1, address: a:1}\n", "not below the node count");
  refused("nodes:\n  - {id: 0, address: nowhere}\n", "is not HOST:PORT");
  refused("nodes:\n  - {id: 0, address: 'tls://nowhere'}\n", "is not HOST:PORT");
  refused("nodes:\n  - {id: 0, address: 'a:99999'}\n", "is not HOST:PORT");
  refused("nodes:\n  - {address: a:1}\n", "has no 'id'");
  refused("nodes:\n  - {id: -1, address: a:1}\n", "wrong type");
  refused("nodes:\n  - {id: 0, address: a:1, colour: red}\n", "unknown node setting 'colour'");
  refused("nodes:\n  - {id: 0, address: a:1}\ncolour: red\n", "unknown setting 'colour'");
  refused(std::string(kMaxClusterFileSize + 1, ' '), "over");
}
