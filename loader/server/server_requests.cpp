// A request's way into the worker (screened by Intake, run inline or queued, its data
// fetched) and its reply's way out (a lane, UCX or TLS; unread replies bounded), and the
// sweep that closes connections (UcxServer::Impl, server_impl.h).
#include "server/server_impl.h"

namespace xcargo::loader {

using namespace wire;
using namespace server_detail;

namespace {
// A region read small enough to copy inside the receive callback; larger ones are queued
// like other requests so that the copy does not hold up progress.
constexpr uint64_t kInlineReadBytes = 64 * 1024;
// Misjudged inline runs (Engine::misjudged_runs) after which a worker runs no TLS client's
// kernel inline: each held newcomers up for up to a kernel's time limit, and a TLS client
// need not be this host's (a door client is this user's own process).
constexpr uint32_t kTlsInlineMisjudged = 2;
bool small_read(ByteView header) {
  auto q = wire::decode_region_read(header);
  return !q.ok() || q->length <= kInlineReadBytes;  // one that does not decode is answered at once
}
}  // namespace

void UcxServer::Impl::sweep() {
  const auto now = Clock::now();
  if (now < next_sweep) return;
  next_sweep = now + timing::kSweepEvery;
  handler->flush_runs();
  (void)trim_large(timing::kKeepLargeBuffers);
  for (std::shared_ptr<Job>& j : jobs.expire(now)) {
    Client* c = eps.find(j->ep);
    log("dropped a request of type " + std::to_string(int(j->type)) + " from " + (c ? c->peer : std::string("a peer")) +
        ": its " + std::to_string(j->length) + " bytes did not arrive within " +
        std::to_string(timing::transfer_deadline(j->length).count() / 1000) + " s; closing its connection");
    if (c && c->serial == j->serial) {
      close_conn(j->ep);  // completes the receive with an error (on_data), so the job stays alive until then
      eps.erase(j->ep);
    }
    jobs.hold(std::move(j));
  }
  peers->sweep(now, opt.auth_deadline);
  ucx_transport->sweep(now);
  if (tls_transport) tls_transport->sweep(now);
  reap_lanes();
  std::vector<std::string> late;
  for (Ep ep : eps.sweep(now, opt.gate->mode() == AuthMode::required, opt.auth_deadline, &late)) close_conn(ep);
  for (const std::string& peer : late)
    log("closed the connection from " + peer + ": not authenticated within " + std::to_string(opt.auth_deadline.count() / 1000) + " s");
}

void UcxServer::Impl::intake(MsgType type, Ep ep, const uint8_t* header, size_t header_length, void* data, size_t length, bool rndv,
            const std::shared_ptr<Lane>* lane, Bytes* owned) {
  ByteView hv(header, std::min(header_length, kMaxHeader));
  Client* client = ep ? eps.find(ep) : nullptr;
  if (!admission->screen(type, ep, client, &hv)) return;
  if (type == MsgType::kick) return;  // it woke this worker, which polls its lanes next
  if (restart) return unrun(ep, type, hv);  // this worker is ending
  if (type == MsgType::lane) return open_lane(ep, client, hv);
  if (type == MsgType::cancel) return cancel(ep, client, hv);
  // A relay's data at hand (TLS, a lane, UCX eager): sent on at once; UCX rendezvous data
  // is fetched first, as a request's (execute()).
  if (type == MsgType::relay && !rndv) return relay_in(hv, data, length, owned);
  if (type == MsgType::region && opt.one_sided_regions && !ep.is_tls()) return region(ep, hv);
  if (type == MsgType::region || (type == MsgType::region_read && small_read(hv))) {  // answered at once
    RequestOrigin origin(client ? client->origin.get() : nullptr);
    return send(ep, handler->handle(type, hv, {}));
  }
  // An inline kernel holds the thread that takes new connections and handshakes, which no
  // follower can take over: a kernel quick until now that runs long holds every newcomer up
  // (a misjudged run, logged). Once this worker has seen kTlsInlineMisjudged of those, a TLS
  // client's kernels run as jobs, whose leader is deposed after promote_after; the trusted
  // paths (the same-host door, trusted-network UCX) keep running inline (tls_test.sh).
  if ((type == MsgType::invoke || type == MsgType::forward) && opt.inline_quick &&
      (!ep.is_tls() || handler->misjudged_runs() < kTlsInlineMisjudged) && !jobs.any_ready() &&
      !restart && !rndv && header_length <= kMaxHeader &&
      length <= handler->max_input() &&
      run_inline(type, ep, hv, ByteView(static_cast<const uint8_t*>(data), length)))
    return;
  auto job = std::make_shared<Job>();
  if (!admission->admit(type, ep, client, hv, length, &job->charge)) return;
  job->since = Clock::now();
  job->length = length;
  job->ep = ep;
  if (client) job->serial = client->serial;
  job->type = type;
  job->header.assign(hv.begin(), hv.end());
  if (client) job->origin = client->origin;
  if (type == MsgType::invoke) job->reply_address = client_address(job->ep);
  if (lane) (job->lane = *lane)->queued(1);
  const uint64_t limit = type == MsgType::forward ? handler->max_cargo() + handler->max_input()
                                                  : std::max(handler->max_cargo(), handler->max_input());
  if (header_length > kMaxHeader) {
    job->failed = true;
    job->ready = true;
  } else if (length > limit) {
    job->ready = true;  // never fetched; the handler answers "limit" from the header
  } else if (rndv) {
    fetch(*job, data, length);  // run only once its transport has written it whole
  } else if (owned) {
    job->data = std::move(*owned);
    job->ready = true;
  } else {
    const auto* d = static_cast<const uint8_t*>(data);
    job->data.assign(d, d + length);
    job->ready = true;
  }
  jobs.push(std::move(job));
}

void UcxServer::Impl::cancel(Ep ep, const Client* client, ByteView header) {
  auto c = decode_request(header);
  if (!c.ok() || !client) return;  // no reply of its own, not even to say it did not decode
  auto same = [&](const Job& j) {
    return j.ep == ep && j.serial == client->serial && j.type == MsgType::invoke && request_id_of(j.type, j.header) == c->request_id;
  };
  if (std::shared_ptr<Job> queued = jobs.find(same)) {  // answered `cancelled` when its turn comes, instead of run
    queued->cancelled = true;
    return;
  }
  for (const auto& sp : slots) {
    Slot& s = *sp;
    std::shared_ptr<Job> j = s.job.load();
    if (!j || !same(*j) || s.phase.load() == Phase::inline_ || !s.since.load()) continue;
    // Stopped as a kernel past its limit is: its limit becomes the time it has run, and the
    // monitor, woken, times it out (time_out() answers it `cancelled`).
    j->cancelled = true;
    s.limit_ns.store(1, std::memory_order_relaxed);
    monitor->started(s);
    return;
  }  // else it has been answered, or was never here: nothing to do
}

void UcxServer::Impl::send(Ep ep, Reply&& r) {
  Client* c = ep ? eps.find(ep) : nullptr;
  if (!c) return;
  if (c->probe) return transport(ep).send(ep, std::move(r), nullptr);
  if (restart) answered_ending.insert(ep);  // flush_and_quit waits for its client to close it
  if (c->lane && r.type != MsgType::lane_reply &&  // the lane's offer goes before its client has the lane
      c->lane->reply(r.type, r.header, r.data)) {
    give_spare(std::move(r.header));  // copied into the lane: the next reply's
    give_spare(std::move(r.data));
    return;  // a kick, if its client sleeps, once the lane is empty (poll_lanes)
  }
  send_counted(ep, *c, std::move(r));
}

void UcxServer::Impl::send_counted(Ep ep, Client& c, Reply&& r) {
  Transport& t = transport(ep);
  if (std::string why = t.unread_over_limit(ep, c, unread_charge(r.header.size() + r.data.size())); !why.empty()) {
    if (c.closing) return;
    log("closing the connection from " + c.peer + (c.session.who.empty() ? "" : " (" + c.session.who + ")") + ": " + why);
    c.closing = true;
    Connections::doom(c, Clock::now() - timing::kRefusalLinger);  // closed at the next sweep
    return;
  }
  t.send(ep, std::move(r), &c);
}

void UcxServer::Impl::close_conn(Ep ep) { transport(ep).close(ep); }

void UcxServer::Impl::make_room_for(const std::string& host) {
  const std::string out = eps.make_room(host, opt.gate->mode() == AuthMode::required, Clock::now());
  if (!out.empty() && made_room.due())
    log("closing the oldest connection still to authenticate, from " + out + ", for a new one from " + host +
        ": too many wait (" + std::to_string(made_room.count()) + " such so far)");
}

}  // namespace xcargo::loader
