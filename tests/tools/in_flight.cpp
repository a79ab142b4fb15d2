// xcargo-in-flight: a client that sends requests without waiting for replies, over one or
// more connections with one key, as a greedy client would (loader/SECURITY.md, "One client
// cannot hold others up").
// usage: xcargo-in-flight --to HOST:PORT --key KEY --cargo FILE --entry NAME [--u64 N]
//        [--connections C] [--count N] [--wait-s S] [--hold-s H]
//   authenticates C connections (default 1) with KEY, pushes the cargo, sends N invocations
//   (default 300) on each without waiting, then waits up to S s (default 300) for every reply. Prints
//   "sent S: A ok, L limit, O other, M missing" and the first limit message; exits 0 when
//   every request was answered, 1 otherwise, 2 on usage or connection errors.
//   --hold-s H: after sending, reads nothing for H s (a client that does not take its replies),
//   then prints "closed by the node: K of C connections" and exits 0.
//   --hold-until FILE: the same, reading nothing until FILE exists (at most 300 s): the test
//   creates it once the node has done what it waits for.
//   --results-to-idle: the hellos name, for forwarded results, another UCX worker of this
//   process that never reads anything.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "raw_client.h"
#include "tool_args.h"
#include "xcargo/cargo.h"
#include "xcargo/file.h"
#include "xcargo/identity.h"
#include "wire/wire.h"

using namespace xcargo;
using namespace xcargo::wire;
using Clock = std::chrono::steady_clock;

namespace {

constexpr const char* kTool = "xcargo-in-flight";

struct Tally {
  long ok = 0, limit = 0, other = 0;
  std::string first_limit, first_other;
};

ucs_status_t on_result(void* arg, const void* header, size_t length, void*, size_t, const ucp_am_recv_param_t*) {
  auto* t = static_cast<Tally*>(arg);
  auto r = decode_result(ByteView(static_cast<const uint8_t*>(header), length));
  if (!r.ok()) ++t->other, t->first_other = r.error().message();
  else if (r->status == ReplyStatus::ok) ++t->ok;
  else if (r->status == ReplyStatus::limit) {
    if (t->first_limit.empty()) t->first_limit = r->message;
    ++t->limit;
  } else {
    if (t->first_other.empty()) t->first_other = std::string(status_name(r->status)) + ": " + r->message;
    ++t->other;
  }
  return UCS_OK;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string to = test::arg(argc, argv, "--to"), path = test::arg(argc, argv, "--cargo"),
                    entry = test::arg(argc, argv, "--entry");
  const int conns = std::atoi(test::arg(argc, argv, "--connections", "1").c_str());
  const long count = std::atol(test::arg(argc, argv, "--count", "300").c_str());
  if (to.empty() || path.empty() || entry.empty() || conns < 1 || count < 1)
    test::die(kTool, "usage: xcargo-in-flight --to HOST:PORT --key KEY --cargo FILE --entry NAME [--u64 N] [--connections C] [--count N]", 2);
  auto key = SigningKey::load(test::arg(argc, argv, "--key"));
  if (!key.ok()) test::die(kTool, key.error().message(), 2);
  auto cargo = read_file(path, 1u << 30);
  if (!cargo.ok()) test::die(kTool, cargo.error().message(), 2);
  auto parsed = parse_container(*cargo);
  if (!parsed.ok()) test::die(kTool, path + ": " + parsed.error().message(), 2);
  Bytes input;
  if (std::string n = test::arg(argc, argv, "--u64"); !n.empty()) {
    const uint64_t v = std::strtoull(n.c_str(), nullptr, 0);
    input.resize(8);
    std::memcpy(input.data(), &v, 8);
  }

  std::unique_ptr<net::UcxWorker> idle;  // never progressed
  Bytes results_to;
  if (test::flag(argc, argv, "--results-to-idle")) {
    auto w = net::UcxWorker::create();
    if (!w.ok()) test::die(kTool, w.error().message(), 2);
    idle = std::move(*w);
    auto a = idle->address();
    if (!a.ok()) test::die(kTool, a.error().message(), 2);
    results_to = *a;
  }
  std::vector<std::unique_ptr<test::RawClient>> clients;
  std::vector<Tally> tallies(size_t(conns), Tally{});
  for (int i = 0; i < conns; ++i) {
    auto c = std::make_unique<test::RawClient>(kTool, to);
    c->greet(kVersion, results_to);
    if (std::string verdict = c->prove(c->proof(*key)); verdict != "ok") test::die(kTool, "auth: " + verdict, 2);
    if (i == 0) {
      if (!c->ask(MsgType::push, encode(Push{1, cargo->size()}), *cargo, 60)) test::die(kTool, "no push_reply", 2);
      auto r = decode_push_reply(c->answer());
      if (!r.ok() || r->status != ReplyStatus::ok) test::die(kTool, "push refused: " + (r.ok() ? r->message : r.error().message()), 2);
    }
    ucp_am_handler_param_t hp{};  // from now on, count results instead of keeping the last
    hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG;
    hp.id = uint16_t(MsgType::result);
    hp.cb = &on_result;
    hp.arg = &tallies[size_t(i)];
    ucp_worker_set_am_recv_handler(c->worker().worker(), &hp);
    clients.push_back(std::move(c));
  }
  // All requests first (round robin over the connections), then the replies.
  std::vector<ucs_status_ptr_t> pending;
  std::deque<Bytes> headers;  // a send that does not complete at once reads its header later
  for (long n = 0; n < count; ++n)
    for (auto& c : clients) {
      const Bytes& h = headers.emplace_back(c->sealed(encode(Invoke{uint64_t(100 + n), parsed->digest, entry, input.size()})));
      ucp_request_param_t p{};
      p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      p.flags = UCP_AM_SEND_FLAG_REPLY;
      ucs_status_ptr_t r = ucp_am_send_nbx(c->ep(), unsigned(MsgType::invoke), h.data(), h.size(), input.data(), input.size(), &p);
      if (UCS_PTR_IS_PTR(r)) pending.push_back(r);
      else if (UCS_PTR_IS_ERR(r)) test::die(kTool, "send failed", 2);
    }
  const std::string hold_until = test::arg(argc, argv, "--hold-until");
  if (const int hold_s = std::atoi(test::arg(argc, argv, "--hold-s", "0").c_str()); hold_s > 0 || !hold_until.empty()) {
    if (hold_until.empty()) std::this_thread::sleep_for(std::chrono::seconds(hold_s));
    for (const auto until = Clock::now() + std::chrono::seconds(300); !hold_until.empty() && Clock::now() < until &&
                                                                       ::access(hold_until.c_str(), F_OK) != 0;)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    // Hear whether the node hung up: after --hold-until, the node has decided to (it closes
    // the connection at its next sweep), so listen until every connection is lost, for up to
    // 15 s; else 1000 progress calls.
    auto all_lost = [&] {
      for (auto& c : clients)
        if (!c->lost()) return false;
      return true;
    };
    const auto listen_until = Clock::now() + std::chrono::seconds(15);
    for (int k = 0; k < 1000 || (!hold_until.empty() && !all_lost() && Clock::now() < listen_until); ++k)
      for (auto& c : clients) ucp_worker_progress(c->worker().worker());
    long closed = 0;
    for (auto& c : clients) closed += c->lost();
    std::printf("closed by the node: %ld of %d connections\n", closed, int(conns));
    std::fflush(stdout);
    _exit(0);  // requests still pending: no orderly goodbye
  }
  Tally all;
  const long sent = count * conns;
  const auto deadline = Clock::now() + std::chrono::seconds(std::atoi(test::arg(argc, argv, "--wait-s", "300").c_str()));
  for (;;) {
    all = Tally{};
    for (auto& t : tallies) {
      all.ok += t.ok, all.limit += t.limit, all.other += t.other;
      if (all.first_limit.empty()) all.first_limit = t.first_limit;
    }
    if (all.ok + all.limit + all.other >= sent || Clock::now() > deadline) break;
    for (auto& c : clients) ucp_worker_progress(c->worker().worker());
  }
  for (ucs_status_ptr_t r : pending) ucp_request_free(r);
  for (size_t i = 0; i < tallies.size(); ++i)
    std::fprintf(stderr, "connection %zu: %ld ok, %ld limit, %ld other%s%s\n", i, tallies[i].ok, tallies[i].limit, tallies[i].other,
                 tallies[i].first_other.empty() ? "" : "; first other: ", tallies[i].first_other.c_str());
  const long missing = sent - all.ok - all.limit - all.other;
  std::printf("sent %ld: %ld ok, %ld limit, %ld other, %ld missing\n", sent, all.ok, all.limit, all.other, missing);
  if (!all.first_limit.empty()) std::printf("first limit: %s\n", all.first_limit.c_str());
  return missing == 0 ? 0 : 1;
}
