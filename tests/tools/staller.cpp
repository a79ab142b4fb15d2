// xcargo-staller: a client that holds a loader's resources without using them, as a slow or
// hostile client would (loader/SECURITY.md, "One client cannot hold others up").
// usage: xcargo-staller --to HOST:PORT --key KEY [--bytes N] [--hold-s S] [--idle C]
//   authenticated with KEY, starts a push of N bytes (default 64 MiB) and stops sending its
//   data: it makes no UCX progress on it for S seconds (default 30); meanwhile it holds C
//   connections that never authenticate (default 100). Prints "stalling" once all that is in
//   place, then "held S s; the connection was closed by the node: yes|no", then the push's
//   state after its start and at the end (in progress, sent, failed), and exits 0.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "net/ucx.h"
#include "raw_client.h"
#include "tool_args.h"
#include "xcargo/identity.h"
#include "wire/wire.h"

using namespace xcargo;
using namespace xcargo::wire;
using Clock = std::chrono::steady_clock;

namespace {

[[noreturn]] void die(const std::string& what) { test::die("xcargo-staller", what, 2); }

}  // namespace

int main(int argc, char** argv) {
  const std::string to = test::arg(argc, argv, "--to");
  if (to.empty()) die("usage: xcargo-staller --to HOST:PORT --key KEY [--bytes N] [--hold-s S] [--idle C]");
  auto key = SigningKey::load(test::arg(argc, argv, "--key"));
  if (!key.ok()) die(key.error().message());
  const uint64_t bytes = std::stoull(test::arg(argc, argv, "--bytes", "67108864"));
  const int hold_s = std::atoi(test::arg(argc, argv, "--hold-s", "30").c_str());
  const int idle = std::atoi(test::arg(argc, argv, "--idle", "100").c_str());

  test::RawClient c("xcargo-staller", to);
  c.greet();
  if (const std::string v = c.prove(c.proof(*key)); v != "ok") die("the key was not accepted: " + v);
  ucp_worker_h wk = c.worker().worker();

  Bytes cargo(bytes, 0x5a);
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  p.flags = UCP_AM_SEND_FLAG_REPLY;
  ucs_status_ptr_t r = nullptr;
  // The announcement leaves; most of the data does not. On a quick machine all of it once did
  // (the node then refused the whole junk push and nothing stalled): then another push, up to 5.
  for (uint64_t id = 2; id < 7; ++id) {
    if (UCS_PTR_IS_PTR(r)) ucp_request_free(r);  // the last one, all sent
    const Bytes header = c.sealed(encode(Push{id, bytes}));
    r = ucp_am_send_nbx(c.ep(), unsigned(MsgType::push), header.data(), header.size(), cargo.data(), cargo.size(), &p);
    for (int k = 0; k < 1000; ++k) ucp_worker_progress(wk);
    if (UCS_PTR_IS_PTR(r) && ucp_request_check_status(r) == UCS_INPROGRESS) break;
  }
  auto state = [&] {
    if (!UCS_PTR_IS_PTR(r)) return std::string(UCS_PTR_IS_ERR(r) ? "failed at once" : "sent at once");
    const ucs_status_t st = ucp_request_check_status(r);
    return std::string(st == UCS_INPROGRESS ? "in progress" : st == UCS_OK ? "sent" : "failed");
  };
  const std::string after_start = state();
  // Then idle connections: each its own worker, never progressed again once connected
  // (through the same-host door as a RawClient, or to the listener).
  std::vector<std::unique_ptr<net::UcxWorker>> idlers;
  std::vector<std::unique_ptr<test::RawClient>> door_idlers;
  for (int i = 0; i < idle && test::RawClient::door_route(to); ++i)
    door_idlers.push_back(std::make_unique<test::RawClient>("xcargo-staller", to));
  for (int i = 0; i < idle && !test::RawClient::door_route(to); ++i) {
    auto w = net::UcxWorker::create();
    if (!w.ok()) die(w.error().message());
    auto e = net::connect_ep((*w)->worker(), to);
    if (!e.ok()) break;
    // A flush completes once the connection is up (bounded: a node may refuse it).
    ucp_request_param_t fp{};
    ucs_status_ptr_t f = ucp_ep_flush_nbx(*e, &fp);
    const auto until = Clock::now() + std::chrono::seconds(2);
    if (UCS_PTR_IS_PTR(f)) {
      while (ucp_request_check_status(f) == UCS_INPROGRESS && Clock::now() < until) ucp_worker_progress((*w)->worker());
      if (ucp_request_check_status(f) != UCS_INPROGRESS) ucp_request_free(f);
    }
    idlers.push_back(std::move(*w));
  }

  std::printf("stalling\n");
  std::fflush(stdout);
  std::this_thread::sleep_for(std::chrono::seconds(hold_s));
  for (int k = 0; k < 1000 && !c.lost(); ++k) ucp_worker_progress(wk);  // hear whether the node hung up
  std::printf("held %d s; the connection was closed by the node: %s\n", hold_s, c.lost() ? "yes" : "no");
  // For a failure's diagnosis: a push whose data all left before the stall was not stalled.
  std::printf("the push was %s after its start, %s at the end\n", after_start.c_str(), state().c_str());
  std::fflush(stdout);
  (void)r;
  _exit(0);  // no orderly goodbye: the node must cope with that too
}
