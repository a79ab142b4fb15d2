// xcargo-chase: the pointer-chase example's client, and its plain-UCX Active Message baseline.
//
//   xcargo-chase run --cluster FILE --mode xrdma|get|get-rma|am --length L --seed S
//                    [--setup SETUP.xcargo] [--walk WALK.xcargo] [--am-cluster FILE] [--repeat R]
//     xrdma  the walk cargo is pushed to the node holding the first element only; it moves
//            itself from node to node (xc_forward) and the last node replies here
//     get    this client reads every element from its node's region: a region_read request
//            that the node's loader bounds-checks (one round trip each)
//     get-rma  the same with one-sided UCX gets (no code runs on the node); needs loaders
//            with one-sided-regions (and, over tcp or shared memory, trusted-network)
//     am     the same walk as a handler compiled into xcargo-chase am-server processes (no
//            xcargo): the predeployed reference
//     --setup runs SETUP.xcargo's `setup` on every node of --cluster first (lays out the list).
//   xcargo-chase am-server --cluster FILE --node-id K --length L --seed S --ready-file F
//
// `run` prints one JSON object per mode run: time per element, and the last element, the
// element count and the checksum, which must be the same in every mode.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "chase_list.h"
#include "net/ucx.h"
#include "xcargo/cargo.h"
#include "xcargo/client.h"
#include "xcargo/cluster.h"
#include "xcargo/file.h"

using namespace xcargo;
using Clock = std::chrono::steady_clock;

namespace {

std::string arg(int argc, char** argv, const char* name, const char* def = "") {
  for (int i = 2; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return argv[i + 1];
  return def;
}

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "xcargo-chase: error: %s\n", what.c_str());
  std::exit(1);
}

template <class T>
T must(Result<T> r, const std::string& what) {
  if (!r.ok()) die(what + ": " + r.error().message());
  return std::move(*r);
}

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

uint64_t first_element(uint64_t length, uint64_t seed) {
  std::vector<uint64_t> order(length);
  chase_order(order.data(), length, seed);
  return order[0];
}

// ---- The Active Message baseline: the walk compiled in, on plain UCX -------------------

constexpr unsigned kWalkAm = 1, kDoneAm = 2;

// A walk message: the state, then the client's worker address.
struct AmServer {
  uint32_t node = 0, nodes = 1;
  std::vector<chase_elem> slots;
  Cluster cluster;
  std::unique_ptr<net::UcxWorker> w;
  std::map<uint32_t, ucp_ep_h> peers;
  std::map<Bytes, ucp_ep_h> clients;
  std::vector<ucp_ep_h> accepted;

  ucp_ep_h peer(uint32_t id) {
    if (auto it = peers.find(id); it != peers.end()) return it->second;
    return peers[id] = must(net::connect_ep(w->worker(), cluster.find(id)->address), "node " + std::to_string(id));
  }

  ucp_ep_h client(const Bytes& address) {
    if (auto it = clients.find(address); it != clients.end()) return it->second;
    ucp_ep_params_t p{};
    p.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
    p.address = reinterpret_cast<const ucp_address_t*>(address.data());
    p.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    ucp_ep_h ep = nullptr;
    if (ucp_ep_create(w->worker(), &p, &ep) != UCS_OK) die("cannot reach a client");
    return clients[address] = ep;
  }

  // Small messages leave at once; otherwise a copy lives until UCX is done with it.
  static void send(ucp_ep_h ep, unsigned id, const void* header, size_t hlen, const void* data, size_t dlen) {
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL;
    ucs_status_ptr_t r = ucp_am_send_nbx(ep, id, header, hlen, data, dlen, &p);
    if (UCS_PTR_STATUS(r) != UCS_ERR_NO_RESOURCE) return;
    auto* copy = new Bytes(hlen + dlen);
    std::memcpy(copy->data(), header, hlen);
    if (dlen) std::memcpy(copy->data() + hlen, data, dlen);
    ucp_request_param_t q{};
    q.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    q.cb.send = [](void* req, ucs_status_t, void* user) {
      delete static_cast<Bytes*>(user);
      ucp_request_free(req);
    };
    q.user_data = copy;
    r = ucp_am_send_nbx(ep, id, copy->data(), hlen, copy->data() + hlen, dlen, &q);
    if (!UCS_PTR_IS_PTR(r)) delete copy;
  }

  // The handler: walk the local elements, then send the walk on, or the result to the client.
  static ucs_status_t on_walk(void* arg, const void* header, size_t hlen, void* data, size_t dlen,
                              const ucp_am_recv_param_t*) {
    auto* s = static_cast<AmServer*>(arg);
    if (hlen != sizeof(chase_state)) return UCS_OK;
    chase_state st;
    std::memcpy(&st, header, sizeof st);
    const Bytes address(static_cast<uint8_t*>(data), static_cast<uint8_t*>(data) + dlen);
    int r = chase_walk_local(&st, s->slots.data(), s->slots.size(), s->nodes, s->node);
    if (r == 0) send(s->peer(uint32_t(st.cur % s->nodes)), kWalkAm, &st, sizeof st, address.data(), address.size());
    else send(s->client(address), kDoneAm, &st, sizeof st, nullptr, 0);
    return UCS_OK;
  }

  static void on_conn(ucp_conn_request_h req, void* arg) {
    auto* s = static_cast<AmServer*>(arg);
    if (auto ep = net::accept_ep(s->w->worker(), req); ep.ok()) s->accepted.push_back(*ep);
  }
};

int am_server(int argc, char** argv) {
  AmServer s;
  s.cluster = must(read_cluster_file(arg(argc, argv, "--cluster")), "cluster");
  s.node = uint32_t(std::stoul(arg(argc, argv, "--node-id", "0")));
  s.nodes = s.cluster.size();
  const uint64_t length = std::stoull(arg(argc, argv, "--length", "100000")), seed = std::stoull(arg(argc, argv, "--seed", "1"));
  if (!s.cluster.find(s.node)) die("no node " + std::to_string(s.node) + " in the cluster file");
  if (length == 0 || length > CHASE_MAX_LENGTH) die("--length out of range");
  std::vector<uint64_t> order(length);
  chase_order(order.data(), length, seed);
  s.slots.resize(std::max<uint64_t>(1, chase_slots(length, s.nodes, s.node)));
  chase_fill(s.slots.data(), order.data(), length, s.nodes, s.node);
  s.w = must(net::UcxWorker::create(true), "UCX");
  ucp_am_handler_param_t hp{};
  hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG;
  hp.id = kWalkAm;
  hp.cb = &AmServer::on_walk;
  hp.arg = &s;
  ucp_worker_set_am_recv_handler(s.w->worker(), &hp);
  (void)must(net::listen(s.w->worker(), s.cluster.find(s.node)->address, &AmServer::on_conn, &s), "listen");
  const std::string ready = s.cluster.find(s.node)->address + "\n";
  if (auto st = write_file(arg(argc, argv, "--ready-file"), as_bytes(ready)); !st.ok()) die(st.error().message());
  // Polls for --spin-us after its last message, then sleeps, as xcargo-loader --spin-us does.
  const auto spin = std::chrono::microseconds(std::stoul(arg(argc, argv, "--spin-us", "1000")));
  auto last = Clock::now();
  for (;;) {
    if (ucp_worker_progress(s.w->worker())) last = Clock::now();
    else if (Clock::now() - last >= spin) s.w->progress_or_wait(100), last = Clock::now() - spin;
  }
}

// ---- The client ------------------------------------------------------------------------

struct Outcome {
  chase_state st{};
  double ms = 0;
};

void print(const char* mode, const Outcome& o, uint64_t length, uint32_t nodes, double first_ms = -1) {
  std::printf("{\"mode\": \"%s\", \"length\": %llu, \"nodes\": %u, \"ms\": %.3f, \"us_per_element\": %.4f, ", mode,
              (unsigned long long)length, nodes, o.ms, o.ms * 1000 / double(length));
  if (first_ms >= 0) std::printf("\"first_run_ms\": %.3f, ", first_ms);
  std::printf("\"last\": %llu, \"elements\": %llu, \"checksum\": %llu}\n", (unsigned long long)o.st.cur,
              (unsigned long long)o.st.hops, (unsigned long long)o.st.sum);
  std::fflush(stdout);
}

Outcome xrdma(client::Connection& start, const Digest& walk, uint64_t head) {
  chase_state st{head, 0, 0, 0};
  auto t = Clock::now();
  auto r = must(start.invoke(walk, "walk", ByteView(reinterpret_cast<const uint8_t*>(&st), sizeof st)), "walk");
  Outcome o;
  o.ms = ms_since(t);
  if (r.result.status != wire::ReplyStatus::ok || r.output.size() != sizeof st)
    die("walk failed: " + std::string(wire::status_name(r.result.status)) + ": " + r.result.message);
  std::memcpy(&o.st, r.output.data(), sizeof st);
  return o;
}

Outcome get(std::vector<std::unique_ptr<client::Connection>>& nodes, const std::vector<client::RemoteRegion>& regions,
            uint64_t head) {
  const uint32_t n = uint32_t(nodes.size());
  chase_state st{head, 0, 0, 0};
  auto t = Clock::now();
  for (;;) {
    const uint32_t owner = uint32_t(st.cur % n);
    chase_elem e;
    if (auto s = nodes[owner]->get(regions[owner], (st.cur / n) * sizeof e, &e, sizeof e); !s.ok()) die(s.error().message());
    st.sum = st.sum * 31 + e.value;
    st.hops++;
    if (e.next == CHASE_END) break;
    st.cur = e.next;
  }
  return {st, ms_since(t)};
}

chase_state g_done;
bool g_got = false;

Outcome am(const std::string& address, uint64_t head) {
  static std::unique_ptr<net::UcxWorker> w;
  static ucp_ep_h ep = nullptr;
  static Bytes me;
  if (!w) {
    w = must(net::UcxWorker::create(), "UCX");
    me = must(w->address(), "UCX address");
    ucp_am_handler_param_t hp{};
    hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB;
    hp.id = kDoneAm;
    hp.cb = [](void*, const void* header, size_t hlen, void*, size_t, const ucp_am_recv_param_t*) -> ucs_status_t {
      if (hlen == sizeof g_done) std::memcpy(&g_done, header, sizeof g_done), g_got = true;
      return UCS_OK;
    };
    ucp_worker_set_am_recv_handler(w->worker(), &hp);
    ep = must(net::connect_ep(w->worker(), address), "AM server");
  }
  static chase_state st;  // lives until the send completes
  st = {head, 0, 0, 0};
  g_got = false;
  auto t = Clock::now();
  ucp_request_param_t p{};
  ucs_status_ptr_t r = ucp_am_send_nbx(ep, kWalkAm, &st, sizeof st, me.data(), me.size(), &p);
  // Waits as the client library does for an xcargo reply: polls for 200 us, then sleeps on
  // the worker's events, so that the two modes compare the nodes, not the clients.
  const auto deadline = Clock::now() + std::chrono::seconds(120), spin_until = Clock::now() + std::chrono::microseconds(200);
  while (!g_got && Clock::now() < deadline) {
    if (ucp_worker_progress(w->worker()) || Clock::now() < spin_until) continue;
    w->progress_or_wait(10);
  }
  if (UCS_PTR_IS_PTR(r)) {
    while (ucp_request_check_status(r) == UCS_INPROGRESS) ucp_worker_progress(w->worker());
    ucp_request_free(r);
  }
  if (!g_got) die("the AM walk did not come back within 120 s");
  return {g_done, ms_since(t)};
}

Outcome median_of(std::vector<Outcome> v) {
  std::sort(v.begin(), v.end(), [](const Outcome& a, const Outcome& b) { return a.ms < b.ms; });
  return v[v.size() / 2];
}

int run(int argc, char** argv) {
  const Cluster cluster = must(read_cluster_file(arg(argc, argv, "--cluster")), "cluster");
  const std::string mode = arg(argc, argv, "--mode", "xrdma");
  const uint64_t length = std::stoull(arg(argc, argv, "--length", "100000")), seed = std::stoull(arg(argc, argv, "--seed", "1"));
  const int repeat = std::max(1, std::atoi(arg(argc, argv, "--repeat", "3").c_str()));
  if (length == 0 || length > CHASE_MAX_LENGTH) die("--length must be from 1 to " + std::to_string(CHASE_MAX_LENGTH));
  const uint32_t n = cluster.size();
  const uint64_t head = first_element(length, seed);
  if (mode == "am") {
    const Cluster amc = must(read_cluster_file(arg(argc, argv, "--am-cluster")), "--am-cluster");
    if (amc.size() != n) die("--am-cluster must have as many nodes as --cluster");
    std::vector<Outcome> runs;
    for (int i = 0; i < repeat; ++i) runs.push_back(am(amc.find(uint32_t(head % n))->address, head));
    print("am", median_of(runs), length, n);
    return 0;
  }
  client::ConnectOptions co;
  co.one_sided = mode == "get-rma";
  std::vector<std::unique_ptr<client::Connection>> nodes;
  for (uint32_t i = 0; i < n; ++i) nodes.push_back(must(client::connect(cluster.find(i)->address, co), "node " + std::to_string(i)));
  if (const std::string setup = arg(argc, argv, "--setup"); !setup.empty()) {
    const Bytes cargo = must(read_file(setup, 1u << 30), setup);
    const Digest d = must(parse_container(cargo), setup).digest;
    uint64_t in[2] = {length, seed};
    for (uint32_t i = 0; i < n; ++i) {
      auto pushed = must(nodes[i]->push(cargo), "push to node " + std::to_string(i));
      if (pushed.status != wire::ReplyStatus::ok) die("node " + std::to_string(i) + " refused the setup cargo: " + pushed.message);
      auto r = must(nodes[i]->invoke(d, "setup", ByteView(reinterpret_cast<const uint8_t*>(in), sizeof in)), "setup");
      uint64_t h = 0;
      if (r.result.status != wire::ReplyStatus::ok || r.output.size() != 8 || (std::memcpy(&h, r.output.data(), 8), h != head))
        die("setup on node " + std::to_string(i) + " failed: " + wire::status_name(r.result.status) + " " + r.result.message);
    }
  }
  if (mode == "xrdma") {
    const std::string walk = arg(argc, argv, "--walk");
    const Bytes cargo = must(read_file(walk, 1u << 30), walk);
    const Digest d = must(parse_container(cargo), walk).digest;
    client::Connection& start = *nodes[head % n];
    auto t = Clock::now();
    if (!must(start.has(d), "has")) {  // only the first node gets the code; it travels from there
      auto pushed = must(start.push(cargo), "push");
      if (pushed.status != wire::ReplyStatus::ok) die("the walk cargo was refused: " + pushed.message);
    }
    Outcome first = xrdma(start, d, head);
    const double first_ms = ms_since(t);
    // The timed walks' client waits as the AM mode's does (polls 0.2 ms, then sleeps until
    // the result wakes it), so that the two modes compare the nodes: polling to the end of a
    // walk, as the library does for repeated calls, took a core from the two polling nodes.
    client::ConnectOptions sleepy = co;
    sleepy.max_spin_us = 0;
    auto timed = must(client::connect(cluster.find(uint32_t(head % n))->address, sleepy), "node " + std::to_string(head % n));
    std::vector<Outcome> runs;
    for (int i = 0; i < repeat; ++i) runs.push_back(xrdma(*timed, d, head));
    if (runs[0].st.sum != first.st.sum) die("runs disagree");
    print("xrdma", median_of(runs), length, n, first_ms);
    return 0;
  }
  if (mode == "get" || mode == "get-rma") {
    std::vector<client::RemoteRegion> regions;
    for (uint32_t i = 0; i < n; ++i) {
      regions.push_back(must(nodes[i]->region("chase"), "region of node " + std::to_string(i)));
      if (co.one_sided && !nodes[i]->one_sided(regions.back()))
        die("node " + std::to_string(i) + " does not allow one-sided reads (its loader needs --one-sided-regions)");
    }
    std::vector<Outcome> runs;
    for (int i = 0; i < repeat; ++i) runs.push_back(get(nodes, regions, head));
    print(mode.c_str(), median_of(runs), length, n);
    return 0;
  }
  die("--mode must be xrdma, get, get-rma or am");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) die("usage: xcargo-chase run|am-server ... (see the top of examples/pointer-chase/chase.cpp)");
  const std::string verb = argv[1];
  if (verb == "run") return run(argc, argv);
  if (verb == "am-server") return am_server(argc, argv);
  die("unknown command " + verb);
}
