// The executors: threads taking turns as leader (the one that calls into UCX, polls lanes
// and runs requests) while followers finish long kernels, and the monitor's hooks that
// depose a busy leader or time a kernel out (loader/README.md, "Threads").
#include "server/server_impl.h"

#include <sched.h>

namespace xcargo::loader {

using namespace wire;
using namespace server_detail;

void UcxServer::Impl::report_failure(const std::string& line, const std::string& incident_text) {
  log(line);
  flush_log();
  set_incident(incident_text);
}

void UcxServer::Impl::post(Ep ep, uint64_t serial, Step&& s) {
  {
    std::lock_guard<std::mutex> l(outbox_mu);
    outbox.push_back(Posted{ep, serial, std::move(s)});
    outbox_full = true;
  }
  sleeper->wake();
}

Step UcxServer::Impl::execute(Slot& s, Job& j, bool* failed) {
  if (j.failed && receive_failures.due()) {  // leader only: a job is taken and this returns before any kernel
    const Client* c = eps.find(j.ep);
    log("could not receive a request of type " + std::to_string(int(j.type)) + " from " + (c ? c->peer : std::string("a peer")) +
        ": " + (j.receive_error ? std::string("its data transfer failed (") + j.receive_error + ")"
                                 : "its header is over " + std::to_string(kMaxHeader) + " bytes") +
        " (" + std::to_string(receive_failures.count()) + " such so far)");
  }
  if (j.failed) return Step{handler->bad_request("the request's header or data could not be received (over " +
                                                 std::to_string(kMaxHeader) + " header bytes, or the transfer failed)"),
                            reply_to_of(j.type, j.header)};
  RequestOrigin origin(j.origin.get());
  if (j.type == MsgType::relay) {  // its data fetched: on to this node's connection (deliver, on the leader)
    auto m = relayed(j.header, j.data.size());
    if (!m) return Step{{}, {}, false};
    return Step{{MsgType::result, std::move(m->result), std::move(j.data)}, encode(RelayAddress{opt.node_id, m->relay_id})};
  }
  if (j.type != MsgType::invoke && j.type != MsgType::forward) return Step{handler->handle(j.type, j.header, j.data)};
  std::optional<Step> r;
  if (guarded(s, [&] {
        r = j.type == MsgType::invoke ? handler->invoke(j.header, j.data, j.reply_address, false, &j.data)
                                      : handler->forward(j.header, j.data, false, &j.data);
      }))
    return std::move(*r);
  // Before failure_reply asks for the restart: the worker's end must not answer it too. A
  // time-out's answer was counted by time_out.
  const bool timed_out = j.answered.exchange(true);
  *failed = true;
  Step failed_step{failure_reply(s, request_id_of(j.type, j.header), false, about(j.type, j.header, j.origin.get())),
                   reply_to_of(j.type, j.header)};
  if (!timed_out) handler->count_answer(j.type, j.header, failure_of(s, limit_text()).status);
  return failed_step;
}

std::string UcxServer::Impl::about(MsgType type, ByteView header, const std::string* origin) const {
  std::string a = handler->describe(type, header);
  if (origin) a += (a.empty() ? "" : ", ") + *origin;
  return a.empty() ? a : " (" + a + ")";
}

Reply UcxServer::Impl::failure_reply(Slot& s, uint64_t request_id, bool inline_run, const std::string& about) {
  const KernelFailure f = failure_of(s, limit_text(s));
  if (f.status != ReplyStatus::timeout || inline_run) {
    report_failure("failed invoke: " + f.what + (inline_run ? " (run inline)" : "") + about + "; restarting the worker",
                   f.what + about);
  }
  ResultMsg m;
  m.request_id = request_id;
  m.status = f.status;
  m.message = f.message();
  restart = true;
  return {MsgType::result, encode(m), {}};
}

bool UcxServer::Impl::mark_inline(Slot& s, int64_t limit_ns) {
  const int64_t turn = turn_ns.load(std::memory_order_relaxed);
  const int64_t start = turn ? turn : steady_ns();
  s.limit_ns.store(limit_ns, std::memory_order_relaxed);
  if (s.phase.load(std::memory_order_relaxed) == Phase::inline_) {
    s.since.store(start, std::memory_order_release);
    return false;
  }
  s.kernel.store(true, std::memory_order_relaxed);
  s.phase.store(Phase::inline_, std::memory_order_relaxed);
  s.since = start;
  monitor->started(s);
  return true;
}

bool UcxServer::Impl::run_inline(MsgType type, Ep ep, ByteView header, ByteView data) {
  Slot& s = *t_guarded_slot;  // the leader's own: only the leader calls into UCX
  const bool marked = mark_inline(s, requested_limit_ns(type, header));
  if (marked && lane_batch) batch_marked = true;  // poll_lanes unmarks it at the batch's end
  std::optional<Step> r;
  const Client* c = eps.find(ep);
  const std::string* who = c ? c->origin.get() : nullptr;
  RequestOrigin origin(who);
  const ByteView reply_address = type == MsgType::invoke ? ByteView(client_address(ep)) : ByteView();
  if (!guarded(s, [&] {
        r = type == MsgType::invoke ? handler->invoke(header, data, reply_address, true) : handler->forward(header, data, true);
      })) {
    r = Step{failure_reply(s, request_id_of(type, header), true, about(type, header, who)), reply_to_of(type, header)};
    handler->count_answer(type, header, failure_of(s, limit_text()).status);
  }
  if (marked && !lane_batch) unmark_inline(s);
  if (!r) return false;
  if (r->ended_ns) turn_ns.store(r->ended_ns, std::memory_order_relaxed);
  deliver(ep, std::move(*r));
  return true;
}

void UcxServer::Impl::lead(Slot& me) {
  // No activity of its own yet: a thread that takes the lead (at start, or promoted while
  // another runs a kernel) sleeps until something arrives instead of polling, which would
  // take a core from that kernel (2.4 ms against 1.4 ms for a kernel run natively, on 2
  // cores; bench-kernels).
  Clock::time_point last_activity{}, last_yield{};
  struct EndTurn {
    std::atomic<int64_t>& t;
    ~EndTurn() { t.store(0, std::memory_order_relaxed); }
  } end_turn{turn_ns};
  int batch = 0;  // quick requests run since the last progress call (timing::kReadyBatch)
  // The clock, read once per turn of the loop (a clock read costs 25 to 70 ns on a VM, and a
  // turn without a UCX progress call, polling lanes, takes about as long).
  Clock::time_point now = Clock::now();
  while (!quit) {
    now = Clock::now();
    turn_ns.store(ns_of(now), std::memory_order_relaxed);
    // One progress call, then whatever it delivered: every progress call also polls the
    // TCP interface (a system call), so a request should cost as few of them as possible.
    if ((batch == 0 || batch >= timing::kReadyBatch || !jobs.any_ready()) && progress_due(now)) {
      batch = 0;
      ucx_busy = progress_all();
      if (ucx_busy) last_activity = now;
      bump(progress_calls);
    }
    const bool posted = drain_outbox();
    poll_lanes_in_turn(now, last_activity);
    if (restart) return flush_and_quit();
    if (now >= next_sweep) sweep();
    // The oldest request whose data is all here: one still arriving holds up nobody.
    if (std::shared_ptr<Job> j = jobs.take_ready()) {
      if (run_taken(me, j, last_activity, batch)) continue;
      return;  // deposed while it ran: a follower leads
    }
    if (posted) {  // replies of requests another thread ran: their clients' next requests follow, as after execute()
      last_activity = now;
      continue;
    }
    if (!progress_due(now)) continue;
    if ((ucx_busy = progress_all())) {  // more to do before deciding we are idle
      last_activity = now;
      continue;
    }
    const LeadNext next = tier_up_when_idle(me, now, last_activity);
    if (next == LeadNext::leave) return;
    if (next == LeadNext::next_turn) continue;
    // Busy: keep polling a little (a client's next request usually follows within
    // microseconds). Idle: sleep in the kernel until UCX has an event.
    if (now - last_activity < opt.spin) {
      if (now - last_activity >= timing::kYieldEvery && now - last_yield >= timing::kYieldEvery) {  // timing.h
        ::sched_yield();
        last_yield = now;
      }
      continue;
    }
    if (!lanes_idle(true)) continue;
    turn_ns.store(0, std::memory_order_relaxed);  // asleep: a request it wakes for reads the clock
    sleeper->wait(Clock::now() < wary_until ? 1 : int(timing::kIdleWait.count()));
    lanes_idle(false);
  }
}

void UcxServer::Impl::poll_lanes_in_turn(Clock::time_point& now, Clock::time_point& last_activity) {
  const int64_t turn_start = turn_ns.load(std::memory_order_relaxed);
  if (!lanes.empty() && poll_lanes()) {
    // The time: the last kernel's end if one ran (each moves turn_ns to its end, read from
    // the CPU's counter), else the clock. A busy turn read the clock twice, and these
    // reads were 2 to 4 % of a pipelined invocation's worker time.
    const int64_t ended = turn_ns.load(std::memory_order_relaxed);
    now = ended > turn_start ? Clock::time_point(std::chrono::nanoseconds(ended)) : Clock::now();
    last_activity = last_lane_activity = now;
    turn_ns.store(ns_of(now), std::memory_order_relaxed);
  }
}

bool UcxServer::Impl::run_taken(Slot& me, const std::shared_ptr<Job>& j, Clock::time_point& last_activity, int& batch) {
  if (j->lane) j->lane->queued(-1);  // its lane's next requests may come in
  if (restart) {  // a kernel failed since lead's check of its turn: this one does not run here
    if (!j->answered.exchange(true)) unrun(eps.live(j->ep, j->serial), j->type, j->header);
    flush_and_quit();
  }
  // Kicks for the lanes' replies so far, while this thread surely leads: from Phase::leading on
  // the monitor may depose it (after promote_after) and a follower calls into UCX. Sent
  // after that, a kick and the new leader's reply can be written into one TCP endpoint at
  // once: the client gets a garbled message and UCX aborts it (guarded by
  // tests/e2e/adversary_test.sh, millisecond kernels 4 in flight beside a busy loop).
  flush_lanes();
  last_activity = Clock::now();
  if (j->cancelled) {  // its client cancelled it while it waited: it does not run
    answer_cancelled(*j);
    return true;
  }
  me.job.store(j);
  // The time limit is a kernel's: a push waits for its compile (bounded by the compile
  // service's own limit), and timing it out restarted the worker for every cargo.
  me.kernel = j->type == MsgType::invoke || j->type == MsgType::forward;
  me.limit_ns.store(requested_limit_ns(j->type, j->header), std::memory_order_relaxed);
  me.since = ns_of(last_activity);
  me.phase = Phase::leading;
  monitor->started(me);
  bool failed = false;
  Step r = execute(me, *j, &failed);
  last_activity = Clock::now();  // the spin counts from here: a client's next request follows its reply
  Phase expected = Phase::leading;
  const bool still_leader = me.phase.compare_exchange_strong(expected, Phase::idle);
  const bool quick = ns_of(last_activity) - me.since < int64_t(std::chrono::nanoseconds(timing::kBatchRun).count());
  batch = quick ? batch + 1 : 0;
  me.since = 0;
  me.phase = Phase::idle;
  me.job.store(nullptr);
  const bool mine = failed || !j->answered.exchange(true);  // else answered `interrupted` meanwhile
  if (still_leader) {
    if (mine) deliver(eps.live(j->ep, j->serial), std::move(r));
    return true;
  }
  if (mine) post(j->ep, j->serial, std::move(r));  // the new leader sends it
  return false;
}

void UcxServer::Impl::answer_cancelled(Job& j) {
  ResultMsg m;
  m.request_id = request_id_of(j.type, j.header);
  m.status = ReplyStatus::cancelled;
  m.message = "its client cancelled it before it ran";
  if (!j.answered.exchange(true)) {
    handler->count_answer(j.type, j.header, m.status);
    deliver(eps.live(j.ep, j.serial), Step{{MsgType::result, encode(m), {}}, reply_to_of(j.type, j.header)});
  }
}

UcxServer::Impl::LeadNext UcxServer::Impl::tier_up_when_idle(Slot& me, Clock::time_point now, Clock::time_point last_activity) {
  // Nothing to do for a moment: a cargo running its quick tier gets -O2's code. Once the
  // compile service's -O2 object (begun at the push) is in its cache, this thread reads
  // and links it itself (a millisecond or so; looked for at most every kTierUpLook).
  // Else, after kTierUpWait (past the -O2 job's own limit), it waits for the service in this thread while a follower
  // leads (or, with no follower, once idle: requests wait meanwhile). Not at once after
  // the push's reply: its client's first invocation, on its way, would wait for the
  // follower to wake (1 to 4 ms of the first call here).
  if (handler->tier_up_pending() && !tiering &&
      now - last_activity >= (slots.size() > 1 ? std::min<Clock::duration>(opt.spin, timing::kTierUpAfterIdle) : opt.spin)) {
    if (tier_up_since == Clock::time_point{}) tier_up_since = now;  // kTierUpWait counts from here
    if (now - last_tier_look >= timing::kTierUpLook) {
      last_tier_look = now;
      if (handler->tier_up_ready()) {
        tiering = true;
        handler->tier_up(true);
        tiering = false;
        tier_up_since = {};
        return LeadNext::next_turn;
      }
    }
    if (now - tier_up_since >= timing::kTierUpWait && !tiering.exchange(true)) {
      tier_up_since = {};
      depose(me);
      handler->tier_up();
      tiering = false;
      return LeadNext::leave;
    }
  }
  return LeadNext::go_on;
}

bool UcxServer::Impl::drain_outbox() {
  if (!outbox_full.load(std::memory_order_acquire)) return false;  // the usual case: no lock, no deque
  std::deque<Posted> posted;
  {
    std::lock_guard<std::mutex> l(outbox_mu);
    posted.swap(outbox);
    outbox_full = false;
  }
  for (Posted& p : posted) deliver(eps.live(p.ep, p.serial), std::move(p.step));
  return !posted.empty();
}

void UcxServer::Impl::executor(Slot& me) {
  adopt_slot(me);
  while (!quit) {
    {
      std::unique_lock<std::mutex> l(lead_mu);
      lead_cv.wait(l, [&] { return vacant || quit; });
      if (quit) break;
      vacant = false;
      leader = &me;
    }
    lead(me);
  }
  leave_slot(me);
}

void UcxServer::Impl::depose(Slot& s) {
  std::lock_guard<std::mutex> l(lead_mu);
  if (leader == &s) {
    leader = nullptr;
    vacant = true;
    lead_cv.notify_one();
  }
}

void UcxServer::Impl::stop_threads() {
  quit = true;
  sleeper->wake();
  if (probe) probe->wake();
  lead_cv.notify_all();
}

void UcxServer::Impl::stop_monitor() {
  monitor_quit = true;
  monitor->stop();
  if (monitor_thread.joinable()) monitor_thread.join();
}

void UcxServer::Impl::loading(bool starting) {
  Slot* s = t_guarded_slot;
  if (!s || s->phase.load() == Phase::idle || s->phase.load() == Phase::inline_) return;
  if (starting) {  // the longer limit first: the monitor never sees the kernel's with the load's start
    s->kernel_after_load = s->kernel.load();
    s->kernel = false;
    s->since = steady_ns();
  } else {  // the new start first, for the same reason
    s->since = steady_ns();
    s->kernel = s->kernel_after_load;
  }
  monitor->started(*s);  // its deadline may now come before the monitor's next look
}

void UcxServer::Impl::time_out(Slot& s) {
  const std::shared_ptr<Job> running = s.job.load();
  const bool cancelled = running && running->cancelled;  // cancel() set its limit to now
  const std::string what = cancelled ? "its client cancelled the kernel while it ran"
                           : s.kernel ? "the kernel ran past the time limit of " + limit_text(s)
                                      : "the request (no kernel: a push, or a cargo loading before its kernel runs) ran past its limit of " +
                                            std::to_string(request_limit().count()) + " s";
  const std::string event = cancelled ? "cancelled invoke: " : "failed invoke: ";
  const bool inline_run = s.phase.load() == Phase::inline_;
  set_incident(what);
  // Ending before the reply leaves: a client that gets it and sends at once must be
  // answered `restarting`, not have its next kernel run in this worker.
  restart = true;
  if (inline_run) {
    loader::time_out(s);  // its own thread logs and answers (failure_reply)
  } else if (std::shared_ptr<Job> j = s.job.load(); j && !j->answered.exchange(true)) {
    const std::string a = about(j->type, j->header, j->origin.get());
    report_failure(event + what + a + "; restarting the worker", what + a);
    ResultMsg m;
    m.request_id = request_id_of(j->type, j->header);
    m.status = cancelled ? ReplyStatus::cancelled : ReplyStatus::timeout;
    m.message = what + " and was stopped; the node recovered";
    {
      RequestOrigin origin(j->origin.get());
      handler->count_answer(j->type, j->header, m.status);
    }
    post(j->ep, j->serial, Step{{MsgType::result, encode(m), {}}, reply_to_of(j->type, j->header)});
  } else {
    log(event + what + "; restarting the worker");
  }
  sleeper->wake();
}

}  // namespace xcargo::loader
