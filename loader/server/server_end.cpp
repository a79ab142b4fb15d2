// The worker's end: after a kernel failure (every request taken in answered, then _exit) or
// in order (what did not run answered `restarting`, replies given time to be read).
#include "server/server_impl.h"

#include "exit_codes.h"

#include <sys/prctl.h>
#include <unistd.h>

namespace xcargo::loader {

using namespace wire;
using namespace server_detail;

Step UcxServer::Impl::interrupted(MsgType type, ByteView header) const {
  ResultMsg m;
  m.request_id = request_id_of(type, header);
  m.status = ReplyStatus::interrupted;
  m.node_id = opt.node_id;
  m.message = "the kernel was running when another kernel's failure made the node replace its worker; it may have "
              "partly run (its writes to node memory stay)";
  handler->count_answer(type, header, ReplyStatus::interrupted);
  return Step{{MsgType::result, encode(m), {}}, reply_to_of(type, header)};
}

void UcxServer::Impl::unrun(Ep ep, MsgType type, ByteView header) {
  if (type == MsgType::forward) return deliver(nullptr, interrupted(type, header));
  if (!ep) return;
  send(ep, {MsgType::result, restarting_header(type, header), {}});
}

Bytes UcxServer::Impl::restarting_header(MsgType type, ByteView header) const {
  ResultMsg m;
  m.request_id = request_id_of(type, header);
  m.status = ReplyStatus::restarting;
  m.node_id = opt.node_id;
  m.message = ending_why;
  handler->count_answer(type, header, ReplyStatus::restarting);
  return encode(m);
}

void UcxServer::Impl::flush_and_quit() {
  ::prctl(PR_SET_NAME, "xcargo-ending");  // no longer the serving worker in ps and pgrep
  flush_lanes();
  release_port();
  // Every request taken in gets its one reply: those whose kernels run in other executors
  // `interrupted` (they cannot be stopped but by the end of this process), the rest
  // `restarting` (they ran no kernel, and what they did ends with this worker: the client
  // sends them again to the next one), as do those that arrive from now on (on_request).
  for (const auto& slot : slots)
    if (std::shared_ptr<Job> j = slot->job.load(); j && !j->answered.exchange(true)) {
      if (j->type != MsgType::invoke && j->type != MsgType::forward) {  // a push, say: its work ends with this worker
        unrun(eps.live(j->ep, j->serial), j->type, j->header);
        continue;
      }
      log("interrupted invoke: " + handler->describe(j->type, j->header) + (j->origin ? ", " + *j->origin : "") +
          ": its kernel was running when another kernel's failure ended the worker");
      RequestOrigin origin(j->origin.get());
      deliver(eps.live(j->ep, j->serial), interrupted(j->type, j->header));
    }
  answer_the_rest();
  for (const std::shared_ptr<Lane>& l : lanes) l->mark_ended();  // no more polls: its client sends the rest elsewhere
  handler->flush_runs(true);
  flush_log();
  _exit(exit_code::kKernelFailure);
}

void UcxServer::Impl::end_in_order() {
  if (!served) return;  // never served (a standby told to stop): nobody to answer
  ::prctl(PR_SET_NAME, "xcargo-ending");  // the main thread's name is the process's in ps and pgrep
  ending_why = "the node is stopping or replacing its worker; this request did not run: send it again";
  restart = true;  // on_request and the lanes answer `restarting` from now on
  flush_lanes();
  release_port();
  answer_the_rest();
}

void UcxServer::Impl::release_port() {
  if (tls_transport) tls_transport->stop_listening();
  ucx_transport->stop_listening();
}

void UcxServer::Impl::answer_the_rest() {
  uint64_t unrun_jobs = 0;
  for (std::shared_ptr<Job>& j : jobs.take_all()) {
    if (j->lane) j->lane->queued(-1);
    unrun(eps.live(j->ep, j->serial), j->type, j->header);
    ++unrun_jobs;
    jobs.hold(std::move(j));  // a transfer still arriving writes into it until the process ends
  }
  if (unrun_jobs) log("answered " + std::to_string(unrun_jobs) + " queued requests 'restarting': they did not run");
  // Replies still to send include one an executor posts just after setting `restart` (a
  // deposed leader whose kernel crashed): keep taking them from the outbox.
  // Requests still coming through lanes are answered `restarting` too (intake, as restart is set).
  const auto deadline = Clock::now() + timing::kFlushReplies;
  do {
    drain_outbox();
    if (!lanes.empty()) poll_lanes();
    flush_lanes();  // the replies just written, whether or not their clients sent more
    progress_all();
  } while (sending() && Clock::now() < deadline);
  // Linger until the clients answered have closed their connections: a reply sent is not
  // yet read, and a client that sees the connection drop first (UCX fails its endpoint on
  // the closed connection-manager socket before it reads the data socket) reports a lost
  // node instead of the reply; a client not yet scheduled on a busy machine sees it so.
  // At least kLingerReplies (results sent to forwarded chains' clients, which do not close
  // this worker's connections to them), at most kLingerForClose; asleep between events.
  const auto start = Clock::now();
  auto open = [&] {
    return std::any_of(answered_ending.begin(), answered_ending.end(), [&](Ep ep) { return eps.find(ep) != nullptr; });
  };
  while (true) {
    const auto now = Clock::now();
    const bool wanted = now - start < timing::kLingerReplies || (sending() && now < deadline) ||
                        (open() && now - start < timing::kLingerForClose);
    if (!wanted) break;
    drain_outbox();
    if (!lanes.empty()) poll_lanes();
    flush_lanes();
    if (tls_transport) tls_transport->poll();
    sleeper->wait(1);
  }
}

}  // namespace xcargo::loader
