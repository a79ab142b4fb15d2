// Tests of what a supervisor hands a worker it starts by exec: everything comes back as it
// was given, and a damaged record is refused, naming it.
#include "worker_start.h"

#include <catch2/catch.hpp>

using namespace xcargo;
using namespace xcargo::loader;

namespace {
WorkerStart sample() {
  WorkerStart w;
  w.cfg.listen = "127.0.0.1:7400";
  w.cfg.tls_listen = "0.0.0.0:7401";
  w.cfg.trust = "/etc/xcargo/trust dir";
  w.cfg.timeout_s = 0.25;
  w.cfg.regions = {"a=4096", "b with space=8192"};
  w.cfg.sandbox = false;
  w.cfg.nodes.nodes = {{0, "tls://10.0.0.1:7401"}, {1, "127.0.0.1:7500"}};
  w.cfg.node_memory_fd = 7;
  w.cfg.kept_cargos_fd = 8;
  w.cfg.node_stats_fd = -1;
  w.user = sandbox::User{"nobody", 65534, 65534};
  for (size_t i = 0; i < w.node_key.raw.size(); ++i) w.node_key.raw[i] = uint8_t(i * 7 + 1);
  w.node_key.id = key_id_of(w.node_key.raw);
  w.clients = "verbs=run KEYLINE a name\nKEYLINE2\n";
  w.tenant = "lab-1";
  w.addr_fd = 3, w.go_fd = 4, w.incident_fd = 5, w.compiler_fd = 6, w.key_fd = 9, w.door_fd = -1, w.tls_fd = 10;
  return w;
}
}  // namespace

TEST_CASE("worker start: what the supervisor gives comes back as it was", "[worker_start]") {
  const WorkerStart w = sample();
  auto back = decode_worker_start(encode(w));
  REQUIRE(back.ok());
  for (const Setting& s : settings()) {
    INFO(s.name);
    CHECK(s.show(back->cfg) == s.show(w.cfg));
  }
  REQUIRE(back->cfg.nodes.nodes.size() == 2);
  CHECK(back->cfg.nodes.nodes[0].address == "tls://10.0.0.1:7401");
  CHECK(back->cfg.nodes.nodes[1].id == 1);
  CHECK(back->cfg.node_memory_fd == 7);
  CHECK(back->cfg.kept_cargos_fd == 8);
  CHECK(back->cfg.node_stats_fd == -1);
  REQUIRE(back->user);
  CHECK(back->user->name == "nobody");
  CHECK(back->user->uid == 65534);
  CHECK(back->node_key.raw == w.node_key.raw);
  CHECK(back->node_key.id == w.node_key.id);
  CHECK(back->clients == w.clients);
  CHECK(back->tenant == "lab-1");
  CHECK(back->addr_fd == 3);
  CHECK(back->key_fd == 9);
  CHECK(back->door_fd == -1);
  CHECK(back->tls_fd == 10);
  WorkerStart open = sample();
  open.clients.reset();
  open.user.reset();
  open.tenant.clear();
  auto back2 = decode_worker_start(encode(open));
  REQUIRE(back2.ok());
  CHECK(!back2->clients);
  CHECK(!back2->user);
  CHECK(back2->tenant.empty());
}

TEST_CASE("worker start: a damaged record is refused, naming it", "[worker_start]") {
  const Bytes good = encode(sample());
  const std::string text(good.begin(), good.end());
  auto refused = [](const std::string& t) {
    auto r = decode_worker_start(ByteView(reinterpret_cast<const uint8_t*>(t.data()), t.size()));
    return r.ok() ? std::string() : r.error().message();
  };
  CHECK(refused(text).empty());
  CHECK(refused(text.substr(0, text.size() - 1)).find("a length past the end") != std::string::npos);
  CHECK(refused(text + "set no-such 1\nx\n").find("no setting no-such") != std::string::npos);
  CHECK(refused(text + "set executors 4\n9999\n").find("executors: must be from 1 to 256") != std::string::npos);
  CHECK(refused(text + "whatever 1\nx\n").find("unknown record whatever") != std::string::npos);
  CHECK(refused(text + "node 7 1\nx\n").find("nodes out of order") != std::string::npos);
  CHECK(refused(text + "fd go 3\nabc\n").find("fd go: not a descriptor") != std::string::npos);
  CHECK(refused("set listen 3\nabc\n").find("no node-key") != std::string::npos);
  CHECK(refused("no newline").find("without its head") != std::string::npos);
  CHECK(refused(std::string(kMaxWorkerStart + 1, 'x')).find("over") != std::string::npos);
}
