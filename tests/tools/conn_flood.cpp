// xcargo-conn-flood: holds connections to a loader that never authenticate and opens a new
// one each time the node closes or refuses one, as a stranger flooding its port would
// (loader/SECURITY.md, "One client cannot hold others up").
// usage: xcargo-conn-flood --to HOST:PORT [--connections N] [--seconds S]
//   keeps N connections (default 130) from one UCX worker for S seconds (default 20).
//   Prints "held N connections for S s; opened O more as the node closed or refused them";
//   exits 0, or 2 if it could not run.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tool_args.h"
#include "net/ucx.h"

using namespace xcargo;
using Clock = std::chrono::steady_clock;

namespace {

struct Connection {
  ucp_ep_h ep = nullptr;
  bool lost = false;
};

void on_error(void* arg, ucp_ep_h, ucs_status_t) { static_cast<Connection*>(arg)->lost = true; }

std::unique_ptr<Connection> open(ucp_worker_h w, const std::string& to) {
  auto c = std::make_unique<Connection>();
  auto ep = net::connect_ep(w, to, &on_error, c.get());
  if (ep.ok()) c->ep = *ep;
  else c->lost = true;
  return c;
}

void close(ucp_worker_h, Connection& c) {
  if (!c.ep) return;
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  p.flags = UCP_EP_CLOSE_FLAG_FORCE;
  ucs_status_ptr_t r = ucp_ep_close_nbx(c.ep, &p);
  if (UCS_PTR_IS_PTR(r)) ucp_request_free(r);
  c.ep = nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string to = test::arg(argc, argv, "--to");
  if (to.empty()) test::die("xcargo-conn-flood", "usage: xcargo-conn-flood --to HOST:PORT [--connections N] [--seconds S]", 2);
  const int n = std::atoi(test::arg(argc, argv, "--connections", "130").c_str());
  const int seconds = std::atoi(test::arg(argc, argv, "--seconds", "20").c_str());
  auto w = net::UcxWorker::create();
  if (!w.ok()) test::die("xcargo-conn-flood", w.error().message(), 2);
  ucp_worker_h wk = (*w)->worker();
  std::vector<std::unique_ptr<Connection>> conns;
  for (int i = 0; i < n; ++i) {
    conns.push_back(open(wk, to));
    for (int k = 0; k < 50; ++k) ucp_worker_progress(wk);
  }
  long reopened = 0;
  for (const auto end = Clock::now() + std::chrono::seconds(seconds); Clock::now() < end;) {
    ucp_worker_progress(wk);
    for (auto& c : conns)
      if (c->lost) {
        close(wk, *c);
        c = open(wk, to);
        ++reopened;
      }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // a pause: the flood must not take a whole core
  }
  std::printf("held %d connections for %d s; opened %ld more as the node closed or refused them\n", n, seconds, reopened);
  std::fflush(stdout);
  _exit(0);  // no orderly goodbye: the node must cope with that too
}
