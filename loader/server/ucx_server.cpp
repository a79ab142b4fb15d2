// UcxServer: the UCX side of the worker. Listener and endpoints, request intake, sends,
// forwards to peer nodes, region registration, and the leader/follower executor pool. The
// parts that need no UCX are beside it: connections.h, jobs.h, in_flight.h, kernel_guard.h,
// monitor.h, auth_gate.h.
#include "ucx_server.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <sys/prctl.h>

#include <algorithm>
#include <cstdlib>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <map>
#include <set>
#include <thread>
#include <vector>

#include "connections.h"
#include "front_door.h"
#include "intake.h"
#include "jobs.h"
#include "kernel_guard.h"
#include "lane.h"
#include "line_limit.h"
#include "log.h"
#include "monitor.h"
#include "peers.h"
#include "self_probe.h"
#include "timing.h"
#include "xcargo/auth.h"
#include "xcargo/cluster.h"
#include "xcargo/large_buffers.h"
#include "xcargo/ucx.h"

namespace xcargo::loader {

using namespace wire;
namespace {

// A reply in flight: its bytes must live until UCX says the send completed.
struct Sending {
  Bytes header, data;
  std::optional<Charge> unread;  // a reply to a client: counted until the client has taken it
  std::atomic<int>* in_flight;
  std::function<void(ucs_status_t)> on_fail;  // forwards: tell the client
  ~Sending() { release_large(std::move(data)); }  // a large reply's pages serve the next one
};

// Where a failure of this request is reported: a forward's client, by address; else empty
// (the requesting endpoint).
Bytes reply_to_of(MsgType type, ByteView header) {
  if (type == MsgType::forward)
    if (auto f = decode_forward(header); f.ok()) return f->reply_address;
  return {};
}

// A region read small enough to copy inside the receive callback; larger ones are queued
// like other requests so that the copy does not hold up progress.
constexpr uint64_t kInlineReadBytes = 64 * 1024;
bool small_read(ByteView header) {
  auto q = decode_region_read(header);
  return !q.ok() || q->length <= kInlineReadBytes;  // one that does not decode is answered at once
}

std::string short_hex(const Digest& d) { return to_hex(ByteView(d).first(8)); }

constexpr uint32_t kAmIds = 65536;  // UCX's Active Message ids are 16 bits

}  // namespace

struct UcxServer::Impl : IntakeHost {
  ServerOptions opt;
  Handler* handler = nullptr;
  Log log;
  char* incident = nullptr;
  size_t incident_size = 0;
  std::unique_ptr<net::UcxWorker> w;
  ucp_listener_h listener = nullptr;
  std::string address;

  // Touched only by the leader (the one thread that may call into UCX).
  Clock::time_point next_sweep{};
  // Floods, logged by Tally (line_limit.h).
  Tally rejected;  // connections refused for too many from their host (Connections::admit)
  Tally failed_accepts;
  Tally receive_failures;  // requests whose header was too long or whose data did not arrive
  Tally noreply;   // requests without a reply endpoint
  Tally strays;    // messages of types that are not requests
  Tally lane_failures;

  std::vector<std::shared_ptr<Lane>> lanes;  // polled by the leader; a Client holds each too
  std::atomic<uint64_t> lanes_opened{0}, lane_requests{0};  // for stats replies
  bool lane_batch = false, batch_marked = false;  // leader only: in poll_lanes; its slot marked (mark_inline)
  Clock::time_point last_lane_activity{}, last_progress{};  // progress_due
  // The leader's clock reading at the start of its current turn (steady ns), refreshed by
  // each kernel's end: the start a request it runs inline is stamped with (for the monitor, a
  // few microseconds early at most). 0 outside a turn (asleep, not leading): then run_inline
  // reads the clock. A read costs 25 to 70 ns on this VM: this one, of the three on an
  // inline invocation's path, was 4 % of a lane round trip in a quick phase.
  std::atomic<int64_t> turn_ns{0};
  bool ucx_busy = false;  // the last progress call did something
  Connections eps;
  // The TLS front door, if the loader has one (front_door.h): its connections are clients
  // like UCX's, in eps under Ep::tls.
  std::unique_ptr<FrontDoor> front;
  std::string tls_address;
  Clock::time_point renew_tls_at{};
  // Refused and failed handshakes, by host (line_limit.h): each with its reason, as long as
  // a host does not flood.
  std::unique_ptr<LineLimit> tls_refusals;
  Tally tls_strays;   // frames from clients that are not requests
  Tally tls_errors;   // authenticated connections ended by an error (a bad frame, a stalled one)
  // Frames still arriving over the front door may declare, in all, the bytes this many keys
  // may hold in flight (FrontDoor::Events::max_partial_total).
  static constexpr uint64_t kPartialKeys = 2;
  // Connections to other loaders, by node id, through Link: UCX, or TLS to a node whose
  // address is tls://HOST:PORT (dialed through the front door, with peer_tls).
  struct Link : PeerLink {
    Impl* self;
    explicit Link(Impl* s) : self(s) {}
    Ep connect(const std::string& address, std::string* why) override {
      if (address.rfind(kTlsScheme, 0) == 0) {
        if (!self->front || !self->peer_tls)
          return *why = "it is reached over TLS, and this node has no TLS front door (tls-listen)", nullptr;
        return Ep::tls(self->front->dial(address.substr(kTlsScheme.size()), self->peer_tls, why));
      }
      auto ep = net::connect_ep(self->w->worker(), address, &Impl::on_ep_error, self);
      if (!ep.ok()) return *why = ep.error().message(), nullptr;
      return *ep;
    }
    // Over TLS, a message fails here only if its connection already had: one queued when the
    // connection is lost later is not reported (its client waits out its time-out).
    void send(Ep ep, Reply&& r, Failed on_fail) override {
      if (TlsConn* c = ep.tls_conn()) {
        if (!self->front->send(*c, r.type, r.header, std::move(r.data)) && on_fail) on_fail("the TLS connection failed");
        give_spare(std::move(r.header));
        return;
      }
      std::function<void(ucs_status_t)> failed;
      if (on_fail) failed = [f = std::move(on_fail)](ucs_status_t st) { f(UCX->ucs_status_string(st)); };
      self->send_on(ep.ucx(), std::move(r), std::move(failed), UCP_AM_SEND_FLAG_REPLY);
    }
    void close(Ep ep) override { self->close_conn(ep); }
  } link{this};
  static constexpr std::string_view kTlsScheme = "tls://";
  std::shared_ptr<tls::Context> peer_tls;  // this worker as a client of its peers' front doors
  std::unique_ptr<Peers> peers;
  // Clients of the front door by their relay id (their reply_address: wire-protocol.md 4.13);
  // an entry is good while eps has its connection with that id.
  std::map<uint64_t, Ep> relays;
  Tally relays_lost;  // relayed results whose client had gone, or that could not reach its node
  std::set<ucp_ep_h> orphans;               // failed peer endpoints awaiting their error callback
  std::set<Ep> answered_ending;       // connections answered since a kernel failure ended this worker
  JobQueue jobs;
  std::atomic<int> in_flight{0};
  std::atomic<uint64_t> progress_calls{0};  // the leader's, for the probe
  std::unique_ptr<SelfProbe> probe;

  // Replies from threads that are no longer leader, and the restart request.
  std::mutex outbox_mu;
  struct Posted {
    Ep ep;
    uint64_t serial;
    Step step;
  };
  std::deque<Posted> outbox;
  std::atomic<bool> outbox_full{false};  // outbox is not empty (set and cleared under outbox_mu)
  std::atomic<bool> restart{false};
  // What a request this worker will not run is told (`restarting`): why it is ending.
  const char* ending_why = "the node is replacing its worker after a kernel failed; this request did not run: send it again";
  // Until then the idle leader sleeps at most 1 ms at a time: UCX 1.13 over tcp does not always
  // wake a waiting worker for the first messages of a new connection (kWaryAfterConnect).
  Clock::time_point wary_until{};
  const Client* last_accepted = nullptr;  // compared only: the probe's own connection is no cause to be wary
  std::atomic<bool> quit{false};
  std::atomic<bool> tiering{false};  // a thread is in handler->tier_up()
  Clock::time_point tier_up_since{}, last_tier_look{};  // leader only: the tier-up's first look, and its latest
  bool started = false;              // start_threads ran
  std::vector<std::thread> threads;  // what start_threads started; run() joins them
  // The monitor's, stopped last: kernels still running in an orderly end keep their time
  // limit (a kernel that signalled its own worker to stop, then spun, kept the worker from
  // ending for good, its port open and unserved: found by trying it, 2026-11-26).
  std::thread monitor_thread;
  std::atomic<bool> monitor_quit{false};

  // Leadership.
  std::mutex lead_mu;
  std::condition_variable lead_cv;
  bool vacant = true;
  Slot* leader = nullptr;
  std::vector<std::unique_ptr<Slot>> slots;

  std::unique_ptr<Monitor> monitor;

  struct HandlerArg {
    Impl* self;
    uint16_t type;
  };
  std::vector<HandlerArg> args = std::vector<HandlerArg>(kAmIds);

  // A request that runs no kernel (a push waiting for the compile service, which may be
  // compiling another cargo's -O2 code for up to its own limit): timed out only past that.
  std::chrono::seconds request_limit() const {
    return std::max(std::chrono::seconds(int64_t(std::ceil(opt.timeout_s))), timing::kCompileLimit + std::chrono::seconds(10));
  }
  std::string limit_text() const {
    char s[32];
    std::snprintf(s, sizeof s, "%g s", opt.timeout_s);
    return s;
  }

  // A failure that ends this worker: its line written at once, then the incident page the
  // supervisor reads (and kills a worker still there kEndingGrace later): the line is on record
  // before anything can end this process.
  void report_failure(const std::string& line, const std::string& incident_text) {
    log(line);
    flush_log();
    set_incident(incident_text);
  }
  void set_incident(const std::string& what) {
    if (!incident || !incident_size) return;
    size_t n = std::min(what.size(), incident_size - 1);
    std::memcpy(incident, what.data(), n);
    incident[n] = '\0';
  }

  static void on_conn(ucp_conn_request_h req, void* arg) {
    auto* self = static_cast<Impl*>(arg);
    std::string from = "?";
    ucp_conn_request_attr_t attr{};
    attr.field_mask = UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ADDR;
    if (UCX->ucp_conn_request_query(req, &attr) == UCS_OK) from = net::to_host_port(reinterpret_cast<sockaddr*>(&attr.client_address));
    // One host cannot crowd others out, strangers even less.
    const std::string host = from.substr(0, from.rfind(':'));
    const std::string why = self->eps.admit(host, self->opt.gate->mode() == AuthMode::required);
    // A refused connection is accepted and closed a little later, like a refused client: UCX
    // 1.13's tcp connection manager aborts the process on an assertion when a connection is
    // rejected (ucp_listener_reject), or closed, before its handshake is done and the client
    // goes away meanwhile (seen under a flood of connections).
    auto ep = net::accept_ep(self->w->worker(), req, &Impl::on_ep_error, self);
    if (!ep.ok()) {
      if (self->failed_accepts.due())
        self->log("could not accept a connection from " + from + ": " + ep.error().message() + " (" +
                  std::to_string(self->failed_accepts.count()) + " such so far)");
      return;
    }
    Client& c = self->eps.add(*ep, from, Clock::now());
    self->wary_until = Clock::now() + timing::kWaryAfterConnect;
    self->last_accepted = &c;
    if (why.empty()) return;
    Connections::doom(c, Clock::now());
    if (self->rejected.due())
      self->log("refused connections from " + host + ": " + why + " (" + std::to_string(self->rejected.count()) + " refused so far)");
  }

  // Leader only: closes connections that were refused, that did not authenticate in time, or
  // whose transfer stopped.
  void sweep() {
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
    if (front) {
      tls_refusals->flush();
      front->sweep(now, opt.auth_deadline, timing::transfer_deadline);
      if (now >= renew_tls_at) renew_tls(now);
    }
    reap_lanes();
    std::vector<std::string> late;
    for (Ep ep : eps.sweep(now, opt.gate->mode() == AuthMode::required, opt.auth_deadline, &late)) close_conn(ep);
    for (const std::string& peer : late)
      log("closed the connection from " + peer + ": not authenticated within " + std::to_string(opt.auth_deadline.count() / 1000) + " s");
  }

  // The front door's settings: a TLS key of this worker's, certified by the node key (the key
  // service's), and who may complete a handshake (AuthGate::admits).
  Result<std::shared_ptr<tls::Context>> tls_context() const {
    auto credential = opt.gate->node_key().tls_credential();
    XC_TRY(credential);
    const AuthGate* gate = opt.gate;
    return tls::Context::create(tls::Context::server, *credential, [gate](const tls::Peer& p, std::string* why) {
      return gate->admits(p.identity, p.certified, why);
    });
  }
  // A fresh certificate well before the last one ends (timing::kRenewTls); a failure keeps
  // the old one and tries again a minute later.
  void renew_tls(Clock::time_point now) {
    auto c = tls_context();
    if (!c.ok()) {
      log("tls: could not renew this worker's certificate (the old one serves on): " + c.error().message());
      renew_tls_at = now + std::chrono::minutes(1);
      return;
    }
    front->set_context(std::move(*c));
    if (auto p = peer_tls_context(); p.ok()) peer_tls = std::move(*p);
    renew_tls_at = now + timing::kRenewTls;
  }
  // The same credential, as a client of other nodes' front doors: they must prove a node key
  // of the cluster's (a peer key, as AuthGate::admits asks of nodes).
  Result<std::shared_ptr<tls::Context>> peer_tls_context() const {
    auto credential = opt.gate->node_key().tls_credential();
    XC_TRY(credential);
    const AuthGate* gate = opt.gate;
    return tls::Context::create(tls::Context::client, *credential, [gate](const tls::Peer& p, std::string* why) {
      if (p.certified && gate->is_peer_key(p.identity)) return true;
      *why = "it proved key " + to_hex(key_id_of(p.identity)) + ", which is no node key of this cluster's (the authorized keys "
             "with the verb forward)";
      return false;
    });
  }
  Status open_front_door(std::chrono::milliseconds wait) {
    auto context = tls_context();
    XC_TRY(context);
    auto peer_context = peer_tls_context();
    XC_TRY(peer_context);
    peer_tls = std::move(*peer_context);
    tls_refusals = std::make_unique<LineLimit>([this](std::string_view l) { log(l); });
    FrontDoor::Events ev;
    ev.accepted = [this](TlsConn& c) {
      const std::string host = c.peer.substr(0, c.peer.rfind(':'));
      if (const std::string why = eps.admit(host, opt.gate->mode() == AuthMode::required); !why.empty()) {
        if (rejected.due())
          log("refused connections from " + host + ": " + why + " (" + std::to_string(rejected.count()) + " refused so far)");
        return false;
      }
      eps.add(Ep::tls(&c), c.peer, Clock::now());
      return true;
    };
    ev.ready = [this](TlsConn& c, const tls::Peer& p) {
      if (Client* cl = eps.find(Ep::tls(&c))) cl->session.proven = p.identity;
    };
    ev.frame = [this](TlsConn& c, wire::Frame& f) {
      const auto t = uint16_t(f.type);
      if (c.dialed) {  // a peer node's answers to this node's greeting
        if (!peer_reply(f.type, f.header) && tls_strays.due())
          log("dropped a message of type " + std::to_string(t) + " from node at " + c.peer + " (not an answer to this node; " +
              std::to_string(tls_strays.count()) + " such so far)");
        return;
      }
      if (t > kMaxMsgType || t % 2 == 0) {  // a client sends requests only
        if (tls_strays.due())
          log("dropped a message of type " + std::to_string(t) + " from " + c.peer + " (not a request; " +
              std::to_string(tls_strays.count()) + " such so far)");
        return;
      }
      intake(f.type, Ep::tls(&c), f.header.data(), f.header.size(), f.data.data(), f.data.size(), false, nullptr, &f.data);
    };
    ev.lost = [this](TlsConn& c, const std::string& why, bool in_handshake) {
      const Ep ep = Ep::tls(&c);
      if (c.dialed) {
        if (peers->lost(ep)) log("the TLS connection to node at " + c.peer + " ended: " + why);
        return;
      }
      const Client* cl = eps.find(ep);
      if (in_handshake && !(cl && cl->doomed)) {
        const std::string host = "from " + c.peer.substr(0, c.peer.rfind(':'));
        tls_refusals->line("refused a TLS connection from " + c.peer + ": " + why, &host);
      } else if (cl && !cl->session.authenticated && !cl->doomed && opt.gate->mode() == AuthMode::required) {
        log("connection from " + c.peer + " closed without authenticating");
      } else if (cl && !cl->doomed && why != "closed by its client" && tls_errors.due()) {
        log("closed the connection from " + c.peer + (cl->session.who.empty() ? "" : " (" + cl->session.who + ")") + ": " + why +
            " (" + std::to_string(tls_errors.count()) + " such so far)");
      }
      eps.erase(ep);
    };
    ev.max_data = [this] { return std::max(handler->max_cargo() + handler->max_input(), handler->max_reply()); };
    // As the bytes a key's requests may hold in flight (in_flight.h), and for all keys the
    // same times kPartialKeys.
    ev.max_partial_per_key = [this] { return kBytesInFlightPerKey * largest_request(); };
    ev.max_partial_total = [this] { return kPartialKeys * kBytesInFlightPerKey * largest_request(); };
    auto door = FrontDoor::listen(opt.tls_listen, std::move(*context), std::move(ev), wait, &tls_address);
    XC_TRY(door);
    XC_TRY(w->watch((*door)->fd()));
    front = std::move(*door);
    renew_tls_at = Clock::now() + timing::kRenewTls;
    return {};
  }
  // One progress call of UCX, and one poll of the front door: whether either did anything.
  bool progress_all() {
    bool busy = UCX->ucp_worker_progress(w->worker()) != 0;
    if (front && front->poll()) busy = true;
    return busy;
  }

  // IntakeHost: what the rules a request meets first (Intake) need from this server.
  std::unique_ptr<Intake> admission;
  Reply hello_reply(ByteView header) override { return handler->handle(MsgType::hello, header, {}); }
  Reply bad_request(const std::string& why) override { return handler->bad_request(why); }
  bool is_probe(const wire::Hello& h) const override { return probe && probe->is_probe(h); }
  void probe_greeted(Client& c) override {
    // Polling every millisecond for the probe's connection, every 2 s, would make an idle
    // loader busy: unless a client connected after it, wait as usual.
    if (last_accepted == &c) wary_until = {};
  }
  void flush_log() override { loader::flush_log(); }

  uint64_t largest_request() const { return std::max(handler->max_cargo(), handler->max_input()); }
  // The unit of the byte limits in flight (in_flight.h): the largest request or reply.
  uint64_t largest() const { return std::max(largest_request(), handler->max_reply()); }
  static void on_ep_error(void* arg, ucp_ep_h ep, ucs_status_t) {
    auto* self = static_cast<Impl*>(arg);  // a client or a peer going away is normal
    if (const Client* c = self->eps.find(ep);
        c && !c->session.authenticated && !c->doomed && !c->probe && self->opt.gate->mode() == AuthMode::required)
      self->log("connection from " + c->peer + " closed without authenticating");
    bool known = self->eps.erase(ep) + self->orphans.erase(ep) > 0;
    if (self->peers->lost(ep)) known = true;
    if (known) close_ep(ep);
  }

  // Completion callbacks release their request: a request freed earlier gets no callback.
  static void on_data(void* request, ucs_status_t status, size_t, void* user) {
    auto* job = static_cast<Job*>(user);
    if (status != UCS_OK) job->failed = true, job->receive_status = int(status);
    job->ready = true;
    UCX->ucp_request_free(request);
  }

  static ucs_status_t on_request(void* arg, const void* header, size_t header_length, void* data, size_t length,
                                 const ucp_am_recv_param_t* param) {
    auto* ha = static_cast<HandlerArg*>(arg);
    Impl* self = ha->self;
    const MsgType type = MsgType(ha->type);
    const bool has_ep = (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) && param->reply_ep;
    if (type != MsgType::forward && !has_ep) {  // a forward's result goes to its client
      if (self->noreply.due())
        self->log("dropped a request without a reply endpoint (" + std::to_string(self->noreply.count()) + " such so far)");
      return UCS_OK;
    }
    self->intake(type, has_ep ? param->reply_ep : nullptr, static_cast<const uint8_t*>(header), header_length, data, length,
                 (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0);
    return UCS_OK;
  }

  // A request, from UCX (on_request) or from a lane (poll_lanes; never rendezvous). ep: its
  // connection, null for a forward that came without one. lane: the lane it came through.
  // owned: data's buffer, which a queued request takes over instead of copying it (TLS).
  void intake(MsgType type, Ep ep, const uint8_t* header, size_t header_length, void* data, size_t length, bool rndv,
              const std::shared_ptr<Lane>* lane = nullptr, Bytes* owned = nullptr) {
    ByteView hv(header, std::min(header_length, kMaxHeader));
    Client* client = ep ? eps.find(ep) : nullptr;
    if (!admission->screen(type, ep, client, &hv)) return;
    if (type == MsgType::kick) return;  // it woke this worker, which polls its lanes next
    if (restart) return unrun(ep, type, hv);  // this worker is ending
    if (type == MsgType::lane) return open_lane(ep, client, hv);
    // A relay's data at hand (TLS, a lane, UCX eager): sent on at once; UCX rendezvous data
    // is fetched first, as a request's (execute()).
    if (type == MsgType::relay && !rndv) return relay_in(hv, data, length, owned);
    if (type == MsgType::region && opt.one_sided_regions && !ep.is_tls()) return region(ep, hv);
    if (type == MsgType::region || (type == MsgType::region_read && small_read(hv))) {  // answered at once
      RequestOrigin origin(client ? client->origin.get() : nullptr);
      return send(ep, handler->handle(type, hv, {}));
    }
    if ((type == MsgType::invoke || type == MsgType::forward) && opt.inline_quick && !jobs.any_ready() &&
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
      job->data = take_large(length);  // run only once UCX has written it whole (on_data)
      ucp_request_param_t p{};
      p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
      p.cb.recv_am = &Impl::on_data;
      p.user_data = job.get();
      ucs_status_ptr_t r = UCX->ucp_am_recv_data_nbx(w->worker(), data, job->data.data(), length, &p);
      if (UCS_PTR_IS_ERR(r)) job->failed = true, job->receive_status = int(UCS_PTR_STATUS(r)), job->ready = true;
      else if (r == nullptr) job->ready = true;  // else on_data completes it
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

  // A lane for the connection (wire-protocol.md 8.1): one per connection, kMaxLanes per worker.
  void open_lane(Ep ep, Client* c, ByteView header) {
    auto q = decode_request(header);
    if (!q.ok() || !c || c->probe || ep.is_tls())
      return send(ep, handler->bad_request(!q.ok() ? q.error().message()
                                           : ep.is_tls() ? "lane: offered on UCX connections only, not over TLS"
                                                         : "lane: not a client connection"));
    LaneOffer m;
    m.request_id = q->request_id;
    reap_lanes();
    if (!c->lane && lanes.size() >= kMaxLanes) {
      m.status = ReplyStatus::limit;
      m.message = "this node has no shared-memory lane to spare (" + std::to_string(kMaxLanes) + " in use); requests go through UCX";
    } else if (!c->lane) {
      if (auto l = Lane::create(ep, c->serial); l.ok()) {
        c->lane = std::move(*l);
        lanes.push_back(c->lane);
        lanes_opened.fetch_add(1, std::memory_order_relaxed);
      } else {
        if (lane_failures.due()) log("cannot make a shared-memory lane: " + l.error().message() + " (" + std::to_string(lane_failures.count()) + " such so far)");
        m.status = ReplyStatus::internal;
        m.message = l.error().message();
      }
    }
    if (c->lane) {
      m.shm_id = c->lane->shm_id();
      m.nonce = c->lane->nonce();
    }
    send(ep, {MsgType::lane_reply, encode(m), {}});
  }
  // Lanes whose connection is gone, or that broke, are polled no more.
  void reap_lanes() {
    std::erase_if(lanes, [](const std::shared_ptr<Lane>& l) { return l.use_count() == 1 || l->broken(); });
  }
  // Leader only: the requests waiting in each lane, up to timing::kReadyBatch from each.
  // Whether any came.
  bool poll_lanes() {
    bool any = false, batch_runs = false;
    lane_batch = true;  // the kernels it runs inline share one monitor mark, each moving its start (mark_inline)
    for (const std::shared_ptr<Lane>& lp : lanes) {
      Lane& l = *lp;
      int n = 0;
      for (; n < timing::kReadyBatch && !l.waits_in_queue(); ++n) {
        MsgType type{};
        ByteView h, d;
        std::string why;
        const auto got = l.next(&type, &h, &d, &why);
        if (got == lane::Ring::Got::nothing) break;
        any = true;
        Client* c = eps.find(l.ep());
        if (!c || c->serial != l.serial()) break;  // its connection is gone: reap_lanes drops the lane
        if (got == lane::Ring::Got::malformed) {
          log("stopped reading the shared-memory lane of " + c->peer + (c->session.who.empty() ? "" : " (" + c->session.who + ")") +
              ": " + why + "; its requests must come through UCX");
          break;
        }
        // Requests only (a client's, and a peer node's forwards): not the handshake, lanes
        // themselves, replies or unknown types. No client writes them, so the lane is read no
        // more (they were dropped and logged every 1000th: a flood of them wrote 1 MB of log a second).
        if (!by_lane(type)) {
          l.stop();
          log("stopped reading the shared-memory lane of " + c->peer + (c->session.who.empty() ? "" : " (" + c->session.who + ")") +
              ": it carried a message of type " + std::to_string(int(type)) +
              ", which only UCX may carry (only requests travel by lane); its requests must come through UCX");
          break;
        }
        bump(lane_requests);
        if (!batch_runs) handler->begin_batch(), batch_runs = true;
        intake(type, l.ep(), h.data(), h.size(), const_cast<uint8_t*>(d.data()), d.size(), false, &lp);
      }
      // Its replies are flushed (Lane::flush) once a poll finds no request from its client,
      // or after a batch's worth: a client still sending requests is awake. With other lanes,
      // at the end of its batch: the next lane's kernels (inline, if one misjudged as quick
      // runs long) must not hold the kick of a client that sleeps.
      l.publish();
      if (l.unflushed() && (n == 0 || lanes.size() > 1 || l.unflushed() >= uint32_t(timing::kReadyBatch))) flush_lane(lp);
    }
    lane_batch = false;
    if (batch_marked) unmark_inline(*t_guarded_slot), batch_marked = false;
    if (batch_runs) handler->end_batch();
    return any;
  }
  static bool by_lane(MsgType t) {
    switch (t) {
      case MsgType::push: case MsgType::has: case MsgType::invoke: case MsgType::list: case MsgType::stats:
      case MsgType::region: case MsgType::region_read: case MsgType::forward: return true;
      default: return false;
    }
  }
  // Before the leader sleeps: tells the lanes' clients to kick it, then looks once more.
  // False: a request came meanwhile (no sleep).
  bool lanes_idle(bool idle) {
    for (auto& l : lanes) l->set_idle(idle);
    if (!idle || lanes.empty()) return true;
    lane::fence();
    for (auto& l : lanes)
      if (l->pending()) return lanes_idle(false), false;
    return true;
  }

  static void on_sent(void* request, ucs_status_t status, void* user) {
    auto* s = static_cast<Sending*>(user);
    if (status != UCS_OK && s->on_fail) s->on_fail(status);
    s->in_flight->fetch_sub(1);
    delete s;
    UCX->ucp_request_free(request);
  }

  // Where a forwarded chain's result for ep's client goes: a relay address naming this node
  // and the connection (wire-protocol.md 4.13), made on its first invoke, whichever the
  // transport; the address a client's hello names is not used.
  const Bytes& client_address(Ep ep) {
    static const Bytes none;
    Client* c = eps.find(ep);
    if (!c) return none;
    if (!c->relay) {
      if (relays.size() > 2 * eps.all().size() + 64)  // forget those whose connection is gone
        std::erase_if(relays, [this](const auto& r) { const Client* k = eps.find(r.second); return !k || k->relay != r.first; });
      auto n = auth::random_nonce();
      uint64_t id = 0;
      if (n.ok()) std::memcpy(&id, n->data(), sizeof id);
      if (id == 0 || relays.count(id)) return none;  // no randomness: its chains' results say unreachable
      c->relay = id;
      relays[id] = ep;
      c->address = encode(RelayAddress{opt.node_id, id});
    }
    return c->address;
  }
  // A result for a client of a node's front door (wire-protocol.md 4.13): to its connection
  // here, or in a relay to the node it is connected to.
  void relay_result(const RelayAddress& to, Reply&& r) {
    if (to.node_id == opt.node_id) return deliver_relayed(to.relay_id, std::move(r));
    std::string why;
    Peer* p = peers->get(to.node_id, &why);
    if (!p) {
      if (relays_lost.due())
        log("dropped a forwarded result for a client of node " + std::to_string(to.node_id) + ": " + why + " (" +
            std::to_string(relays_lost.count()) + " such so far)");
      return;
    }
    Bytes header = encode(Relay{to.relay_id, std::move(r.header)});
    peers->send(*p, {MsgType::relay, std::move(header), std::move(r.data)}, [this, node = to.node_id](const std::string& why) {
      if (relays_lost.due())
        log("dropped a forwarded result for a client of node " + std::to_string(node) + ": " + why + " (" +
            std::to_string(relays_lost.count()) + " such so far)");
    });
  }
  void deliver_relayed(uint64_t id, Reply&& r) {
    auto it = relays.find(id);
    const Client* c = it == relays.end() ? nullptr : eps.find(it->second);
    if (!c || c->relay != id) {
      if (relays_lost.due())
        log("dropped a forwarded result: its client's connection is gone (" + std::to_string(relays_lost.count()) + " such so far)");
      return;
    }
    send(it->second, std::move(r));
  }
  // A relay from a peer node (intake screened it: a key with the verb forward).
  void relay_in(ByteView header, void* data, size_t length, Bytes* owned) {
    auto m = relayed(header, length);
    if (!m) return;
    Bytes d = owned && owned->data() == data ? std::move(*owned) : Bytes(static_cast<const uint8_t*>(data), static_cast<const uint8_t*>(data) + length);
    deliver_relayed(m->relay_id, {MsgType::result, std::move(m->result), std::move(d)});
  }
  // A relay's header, if it decodes and its data is no larger than a reply may be (else
  // dropped, counted in the log). Any thread: logged at the 1st, 2nd, 4th, 8th... such.
  std::atomic<uint64_t> bad_relays{0};
  std::optional<Relay> relayed(ByteView header, uint64_t length) {
    std::string why;
    auto m = decode_relay(header);
    if (!m.ok()) why = m.error().message();
    else if (auto r = decode_result(m->result); !r.ok()) why = r.error().message();
    else if (length > handler->max_reply()) why = std::to_string(length) + " data bytes, over the largest reply (" + std::to_string(handler->max_reply()) + ")";
    if (why.empty()) return std::move(*m);
    const uint64_t n = ++bad_relays;
    if ((n & (n - 1)) == 0) log("dropped a relay: " + why + " (" + std::to_string(n) + " such so far)");
    return std::nullopt;
  }

  // Leader only, as everything that follows down to execute(). A reply on an accepted
  // endpoint (none if the client went away). A client that does not take its replies cannot
  // make the worker keep them without bound: past the limits in flight its connection is
  // closed.
  void send(Ep ep, Reply&& r) override {
    Client* c = ep ? eps.find(ep) : nullptr;
    if (!c) return;
    if (c->probe) return send_on(ep.ucx(), std::move(r));
    if (restart) answered_ending.insert(ep);  // flush_and_quit waits for its client to close it
    if (c->lane && r.type != MsgType::lane_reply &&  // the lane's offer goes before its client has the lane
        c->lane->reply(r.type, r.header, r.data)) {
      give_spare(std::move(r.header));  // copied into the lane: the next reply's
      give_spare(std::move(r.data));
      return;  // a kick, if its client sleeps, once the lane is empty (poll_lanes)
    }
    send_ucx(ep, *c, std::move(r));
  }
  // After replies written into lane l: if its client sleeps, a kick through UCX wakes it,
  // counted as a reply it has not read (a client that set its idle flag and never let UCX
  // deliver made the worker queue a kick per reply, uncounted: 456 MB in 60 s; found by an
  // attacker helper).
  void flush_lane(const std::shared_ptr<Lane>& l) {
    Client* c = eps.find(l->ep());
    if (l->flush() && c && c->lane == l) send_ucx(l->ep(), *c, Reply{MsgType::kick, {}, {}});
  }
  // Every lane's replies not flushed yet: before the leader runs a request that may take a
  // while, or the worker ends.
  void flush_lanes() {
    for (const std::shared_ptr<Lane>& l : lanes)
      if (l->unflushed()) flush_lane(l);
  }
  // The monitor's, when the worker must end and no thread did: a kernel that blocked the
  // time-out signal spins, run inline by the leader (an inline run is not deposed), so no
  // thread answers what is left. Through the lanes, shared memory only (the stuck thread may
  // be inside UCX's receive callback): the staged replies, of requests that ran before that
  // kernel in its lane batch, are written (29 were lost; the adversary test checks it), and
  // each request still waiting in a lane is answered `restarting`, which its client sends
  // again to the next worker (32 per client were left to a lost connection, though they
  // never ran; attacker helper, 2026-11-27). Requests that came through UCX and wait in the
  // queue are not answered (SECURITY.md, what is not protected). A live leader would have
  // ended the worker itself (flush_and_quit), so the leader is inside that kernel and no
  // thread touches the lanes; lead_mu keeps a follower from taking the lead meanwhile. No
  // kick: the process ends next, which wakes a sleeping client, and its library reads its
  // lane before it reports the connection lost.
  void end_lanes_at_forced_end() {
    std::lock_guard<std::mutex> l(lead_mu);
    Bytes buf;
    uint64_t answered = 0;
    for (const std::shared_ptr<Lane>& lane : lanes) {
      lane->publish();
      for (uint32_t k = 0; k < lane::kSlots; ++k) {
        MsgType type{};
        ByteView h, d;
        std::string why;
        if (lane->next_into(buf, &type, &h, &d, &why) != lane::Ring::Got::frame) break;
        if (!by_lane(type) || type == MsgType::forward) continue;  // a forward's result goes to its client, through UCX
        if (!lane->reply(MsgType::result, restarting_header(type, h), {})) break;  // its ring is full: the client sees the connection lost
        ++answered;
      }
      lane->publish();
      lane->mark_ended();  // what its client writes from now on is not read: it sends that again elsewhere
    }
    if (answered) log("answered " + std::to_string(answered) + " requests waiting in shared-memory lanes 'restarting': they did not run");
  }
  // A reply through UCX, counted among its client's unread replies until UCX has sent it,
  // or through TLS, where what its socket has not taken counts.
  void send_ucx(Ep ep, Client& c, Reply&& r) {
    const uint64_t size = unread_charge(r.header.size() + r.data.size());
    std::string why = ep.is_tls() ? tls_unread_over_limit(*ep.tls_conn(), size)
                                  : unread_over_limit(c.usage.get(), c.key_usage.get(), size, largest());
    if (!why.empty()) {
      if (c.closing) return;
      log("closing the connection from " + c.peer + (c.session.who.empty() ? "" : " (" + c.session.who + ")") + ": " + why);
      c.closing = true;
      Connections::doom(c, Clock::now() - timing::kRefusalLinger);  // closed at the next sweep
      return;
    }
    if (ep.is_tls()) {
      front->send(*ep.tls_conn(), r.type, r.header, std::move(r.data));
      give_spare(std::move(r.header));
      return;
    }
    send_on(ep.ucx(), std::move(r), {}, 0, c.usage, c.key_usage);
  }
  std::string tls_unread_over_limit(const TlsConn& c, uint64_t size) const {
    const uint64_t queued = front->queued(c), limit = kBytesInFlightPerConnection * largest();
    if (queued + size <= limit) return {};
    return "its client has not read " + std::to_string(queued) + " bytes of replies, and " + std::to_string(size) +
           " more would pass the limit of " + std::to_string(limit);
  }
  // Closes a client's connection, whichever transport carries it.
  void close_conn(Ep ep) {
    if (TlsConn* t = ep.tls_conn()) return front->close(t);
    close_ep(ep.ucx());
  }

  // on_fail runs if the message cannot be delivered (the peer went away).
  // flags: UCP_AM_SEND_FLAG_REPLY on messages to peers, whose answers must name this endpoint.
  // unread: where the reply counts among unread replies while it waits for its client.
  void send_on(ucp_ep_h ep, Reply&& r, std::function<void(ucs_status_t)> on_fail = {}, uint32_t flags = 0,
               std::shared_ptr<Usage> unread = {}, std::shared_ptr<Usage> unread_key = {}) {
    {  // Most replies are small and leave at once, without a request to keep their bytes alive.
      ucp_request_param_t p{};
      p.op_attr_mask = UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL | (flags ? UCP_OP_ATTR_FIELD_FLAGS : 0);
      p.flags = flags;
      ucs_status_ptr_t req = UCX->ucp_am_send_nbx(ep, unsigned(r.type), r.header.data(), r.header.size(), r.data.data(),
                                             r.data.size(), &p);
      if (req == nullptr) return;
      if (UCS_PTR_STATUS(req) != UCS_ERR_NO_RESOURCE) {  // failed for good
        if (on_fail) on_fail(UCS_PTR_STATUS(req));
        return;
      }
    }
    auto* s = new Sending{std::move(r.header), std::move(r.data), {}, &in_flight, std::move(on_fail)};
    if (unread || unread_key) s->unread.emplace(std::move(unread), std::move(unread_key), unread_charge(s->header.size() + s->data.size()), Charge::reply);
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | (flags ? UCP_OP_ATTR_FIELD_FLAGS : 0);
    p.flags = flags;
    p.cb.send = &Impl::on_sent;
    p.user_data = s;
    in_flight++;
    ucs_status_ptr_t req = UCX->ucp_am_send_nbx(ep, unsigned(r.type), s->header.data(), s->header.size(), s->data.data(),
                                           s->data.size(), &p);
    if (req == nullptr || UCS_PTR_IS_ERR(req)) {  // completed at once, or failed: no callback comes
      if (UCS_PTR_IS_ERR(req) && s->on_fail) s->on_fail(UCS_PTR_STATUS(req));
      in_flight--;
      delete s;
    }
  }

  // A result for a client by its address (the end of a forwarded chain): always a relay
  // address its own node made (wire-protocol.md 4.13). Any other address is dropped: this
  // node never creates an endpoint from bytes a client or a peer wrote (UCX aborts on a
  // malformed worker address, and a valid one would have it dial whatever the writer chose).
  void send_to_address(const Bytes& address, Reply&& r) {
    if (auto relay = relay_address_of(address)) return relay_result(*relay, std::move(r));
    if (relays_lost.due())
      log("dropped a forwarded result: its chain names no relay address for its client (" + std::to_string(relays_lost.count()) +
          " such so far)");
  }

  // Messages of types no peer may send this node: dropped, and counted in the log.
  static ucs_status_t on_stray(void* arg, const void*, size_t, void*, size_t, const ucp_am_recv_param_t*) {
    auto* ha = static_cast<HandlerArg*>(arg);
    if (ha->self->strays.due())
      ha->self->log("dropped a message of type " + std::to_string(ha->type) + " (not a request; " +
                    std::to_string(ha->self->strays.count()) + " such so far)");
    return UCS_OK;
  }

  // hello_reply, auth_reply and lane_reply from peers this node greeted: it proves itself with
  // its node key, then sends what waited. Anyone can send these; what answers nothing this
  // node asked (Peers: signatures, random request ids) is counted and logged as a stray.
  static ucs_status_t on_peer_reply(void* arg, const void* header, size_t header_length, void*, size_t,
                                    const ucp_am_recv_param_t*) {
    auto* ha = static_cast<HandlerArg*>(arg);
    const ByteView hv(static_cast<const uint8_t*>(header), std::min(header_length, kMaxHeader));
    if (!ha->self->peer_reply(MsgType(ha->type), hv)) return on_stray(arg, header, header_length, nullptr, 0, nullptr);
    return UCS_OK;
  }
  // Whether a message answered this node's greeting of a peer (else the caller counts it).
  bool peer_reply(MsgType type, ByteView hv) {
    if (type == MsgType::hello_reply) {
      auto r = decode_hello_reply(hv);
      return r.ok() && peers->on_hello_reply(*r);  // else not from a peer this node greeted
    }
    if (type == MsgType::lane_reply) {
      auto r = decode_lane_offer(hv);
      return r.ok() && peers->on_lane_offer(*r);
    }
    if (type != MsgType::auth_reply) return false;
    auto r = decode_auth_reply(hv);
    return r.ok() && peers->on_auth_reply(*r);
  }

  static void close_ep(ucp_ep_h ep) {
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    p.flags = UCP_EP_CLOSE_FLAG_FORCE;
    ucs_status_ptr_t r = UCX->ucp_ep_close_nbx(ep, &p);
    if (r && !UCS_PTR_IS_ERR(r)) UCX->ucp_request_free(r);
  }

  // Sends what one step produced: its result to whoever waits for it, or the computation
  // on to its next node (with the cargo, the first time this peer gets it from here).
  void deliver(Ep ep, Step&& step) {
    if (step.forward) {
      Forward& f = *step.forward;
      const uint32_t node = step.forward_node;
      std::string why;
      Peer* p = peers->get(node, &why);
      if (!p) return undelivered(f, node, why);
      if (step.came_from != Step::kNoNode) peers->holds(step.came_from, f.digest);
      const bool held = p->holds.count(f.digest) > 0;  // no cargo needed, and the lane may carry it
      Bytes data;
      if (!held && !p->sent.count(f.digest))
        if (auto cargo = handler->cargo_bytes(f.digest)) {
          f.cargo_size = cargo->size();
          data.reserve(cargo->size() + step.forward_input.size());
          data.assign(cargo->begin(), cargo->end());
          p->sent.insert(f.digest);
        }
      if (f.cargo_size == 0) data = std::move(step.forward_input);  // the input alone: not copied
      else data.insert(data.end(), step.forward_input.begin(), step.forward_input.end());
      // Into a buffer an earlier message gave back (Peers::send), with room for the token.
      Bytes header = take_spare();
      header.reserve(128 + f.entry.size() + f.reply_address.size() + kTokenSize);
      forwards.encode(f, header);
      const uint64_t n = remember_forward(f, node, p->ep);
      peers->send(*p, {MsgType::forward, std::move(header), std::move(data)}, [this, n](const std::string& why) { forward_failed(n, why); },
                  held);
      give_spare(std::move(f.reply_address));  // the next hop's (Handler::run takes a spare for it)
      return;
    }
    if (!step.send_reply) return;
    if (step.reply_to.empty()) return send(ep, std::move(step.reply));
    send_to_address(step.reply_to, std::move(step.reply));
  }

  wire::ForwardEncoder forwards;  // leader only, as deliver()

  // Where a region is, with its remote key: registered with UCX on first request.
  void region(Ep ep, ByteView header) {
    auto q = decode_region(header);
    if (!q.ok()) return send(ep, handler->bad_request(q.error().message()));
    RegionReply r;
    r.request_id = q->request_id;
    Region* reg = handler->regions().find(q->name);
    if (!reg) {
      r.status = ReplyStatus::no_region;
    } else if (!reg->ucx_memh) {
      ucp_mem_map_params_t mp{};
      mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
      mp.address = reg->base;
      mp.length = reg->length;
      ucp_mem_h memh = nullptr;
      void* packed = nullptr;
      size_t size = 0;
      if (ucs_status_t s = UCX->ucp_mem_map(w->context(), &mp, &memh); s != UCS_OK) {
        log("cannot register region " + reg->name + ": " + UCX->ucs_status_string(s));
        r.status = ReplyStatus::internal;
      } else if (s = UCX->ucp_rkey_pack(w->context(), memh, &packed, &size); s != UCS_OK || size > kMaxAddress) {
        log("cannot pack the key of region " + reg->name + ": " + UCX->ucs_status_string(s));
        UCX->ucp_mem_unmap(w->context(), memh);
        r.status = ReplyStatus::internal;
      } else {
        reg->rkey.assign(static_cast<uint8_t*>(packed), static_cast<uint8_t*>(packed) + size);
        UCX->ucp_rkey_buffer_release(packed);
        reg->ucx_memh = memh;
      }
    }
    if (reg && reg->ucx_memh) {
      r.address = reinterpret_cast<uintptr_t>(reg->base);
      r.length = reg->length;
      r.rkey = reg->rkey;
    }
    send(ep, {MsgType::region_reply, encode(r), {}});
  }

  // What a forward's failure must tell its client, for the forwards in flight (leader only).
  // A failure callback holding the whole Forward cost an allocation and its free per hop;
  // it holds this and a serial now (within std::function's own storage), and the record is
  // reused kForwardFates forwards later, its buffers with it.
  struct ForwardFate {
    uint64_t serial = 0;
    uint32_t node = 0;
    Ep ep;
    Forward f;
  };
  static constexpr size_t kForwardFates = 4096;  // past this many in flight, a failure's record is gone (logged)
  std::vector<ForwardFate> fates;  // grows to kForwardFates as forwards are sent
  uint64_t fates_made = 0;
  uint64_t remember_forward(const Forward& f, uint32_t node, Ep ep) {
    const uint64_t n = ++fates_made;
    const size_t i = n % kForwardFates;
    if (i >= fates.size()) fates.resize(i + 1);
    ForwardFate& r = fates[i];
    r.serial = n;
    r.node = node;
    r.ep = ep;
    r.f = f;  // a copy into the record's own buffers, reused once they are large enough
    return n;
  }
  void forward_failed(uint64_t n, const std::string& why) {
    const size_t i = n % kForwardFates;
    if (i >= fates.size() || fates[i].serial != n) {  // over kForwardFates forwards in flight since: its client waits out its own time-out
      log("failed forward: " + why + " (over " + std::to_string(kForwardFates) +
          " forwards were sent after it before it failed: its client could not be told)");
      return;
    }
    const ForwardFate& r = fates[i];
    if (peers->forget(r.node, r.ep)) {
      if (r.ep.ucx()) orphans.insert(r.ep.ucx());  // closed by on_ep_error: closing it here cancels other sends
      else close_conn(r.ep);
    }
    undelivered(r.f, r.node, why);
  }

  // A forward that could not reach its node: its client gets an `unreachable` result.
  void undelivered(const Forward& f, uint32_t node, const std::string& why) {
    ResultMsg m;
    m.request_id = f.request_id;
    m.status = ReplyStatus::unreachable;
    m.node_id = opt.node_id;
    m.hops = f.hop - 1;
    m.message = "the computation could not be forwarded to node " + std::to_string(node) + ": " + why;
    log("failed forward: " + short_hex(f.digest) + "/" + f.entry + ": " + m.message);
    send_to_address(f.reply_address, {MsgType::result, encode(m), {}});
  }

  void post(Ep ep, uint64_t serial, Step&& s) {
    {
      std::lock_guard<std::mutex> l(outbox_mu);
      outbox.push_back(Posted{ep, serial, std::move(s)});
      outbox_full = true;
    }
    w->wake();
  }

  // Runs one request; a kernel fault comes back here as a "crashed" result.
  // *failed: a kernel fault stopped it (its reply is this step, whatever else happens).
  Step execute(Slot& s, Job& j, bool* failed) {
    if (j.failed && receive_failures.due()) {  // leader only: a job is taken and this returns before any kernel
      const Client* c = eps.find(j.ep);
      log("could not receive a request of type " + std::to_string(int(j.type)) + " from " + (c ? c->peer : std::string("a peer")) +
          ": " + (j.receive_status ? std::string("its data transfer failed (") + UCX->ucs_status_string(ucs_status_t(j.receive_status)) + ")"
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
    j.answered = true;  // before failure_reply asks for the restart: the worker's end must not answer it too
    *failed = true;
    return Step{failure_reply(s, request_id_of(j.type, j.header), false, about(j.type, j.header, j.origin.get())),
                reply_to_of(j.type, j.header)};
  }

  // " (cargo DIGEST/ENTRY, signed by ..., from PEER key ...)": whose kernel did not come back.
  std::string about(MsgType type, ByteView header, const std::string* origin) const {
    std::string a = handler->describe(type, header);
    if (origin) a += (a.empty() ? "" : ", ") + *origin;
    return a.empty() ? a : " (" + a + ")";
  }

  // Back from guarded(): the kernel crashed, or (inline) ran past the limit and was stopped.
  // It may have damaged this process: answer, then restart.
  // about: whose kernel it was (about()). A time-out of a queued request was logged by the
  // monitor, which answered it; an inline one is logged here.
  Reply failure_reply(Slot& s, uint64_t request_id, bool inline_run, const std::string& about) {
    const KernelFailure f = failure_of(s, limit_text());
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

  // Marks this thread's slot as running a quick kernel inline (phase 3) from now (the turn's
  // clock, or the last kernel's end). The first request of a lane batch (poll_lanes) makes
  // the mark, a sequentially consistent store: the barrier the monitor's protocol needs
  // (Monitor::started). The batch's next requests only move its start on, with a plain store
  // (the monitor, if it looks at the earlier start, wakes early, never late): each kernel's
  // time limit counts from its own start. One start for the whole batch let a kernel within
  // its limit get the next one, another client's, timed out and blamed (attacker helper,
  // 2026-11-27), and a barrier per request waited for the lane stores of the reply before it
  // to reach the cache (spread_counter.h). False: marked already.
  bool mark_inline(Slot& s) {
    const int64_t turn = turn_ns.load(std::memory_order_relaxed);
    const int64_t start = turn ? turn : steady_ns();
    if (s.phase.load(std::memory_order_relaxed) == 3) {
      s.since.store(start, std::memory_order_release);
      return false;
    }
    s.kernel.store(true, std::memory_order_relaxed);
    s.phase.store(3, std::memory_order_relaxed);
    s.since = start;
    monitor->started(s);
    return true;
  }
  static void unmark_inline(Slot& s) {
    s.since.store(0, std::memory_order_release);
    s.phase.store(0, std::memory_order_release);
  }
  // A count only the leader adds to: a plain load and store, not a locked add (a barrier).
  static void bump(std::atomic<uint64_t>& count) {
    count.store(count.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }

  // Runs an invoke or a forward inside the receive callback when its kernel is known to be
  // quick, so the reply leaves without a hand-off or another progress call. False: not run,
  // queue it.
  bool run_inline(MsgType type, Ep ep, ByteView header, ByteView data) {
    Slot& s = *t_guarded_slot;  // the leader's own: only the leader calls into UCX
    const bool marked = mark_inline(s);
    if (marked && lane_batch) batch_marked = true;  // poll_lanes unmarks it at the batch's end
    std::optional<Step> r;
    const Client* c = eps.find(ep);
    const std::string* who = c ? c->origin.get() : nullptr;
    RequestOrigin origin(who);
    const ByteView reply_address = type == MsgType::invoke ? ByteView(client_address(ep)) : ByteView();
    if (!guarded(s, [&] {
          r = type == MsgType::invoke ? handler->invoke(header, data, reply_address, true) : handler->forward(header, data, true);
        }))
      r = Step{failure_reply(s, request_id_of(type, header), true, about(type, header, who)), reply_to_of(type, header)};
    if (marked && !lane_batch) unmark_inline(s);
    if (!r) return false;
    if (r->ended_ns) turn_ns.store(r->ended_ns, std::memory_order_relaxed);
    deliver(ep, std::move(*r));
    return true;
  }

  // The leader's loop: progress, send posted replies, run ready requests. Returns when this
  // thread was deposed while running a request, or on quit.
  void lead(Slot& me) {
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
    // The clock, read once per turn of the loop (a read costs 25 to 70 ns on this VM, and a
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
      if (restart) return flush_and_quit();
      if (now >= next_sweep) sweep();
      // The oldest request whose data is all here: one still arriving holds up nobody.
      if (std::shared_ptr<Job> j = jobs.take_ready()) {
        if (j->lane) j->lane->queued(-1);  // its lane's next requests may come in
        if (restart) {  // a kernel failed since the check above: this one does not run here
          if (!j->answered.exchange(true)) unrun(eps.live(j->ep, j->serial), j->type, j->header);
          return flush_and_quit();
        }
        // Kicks for the lanes' replies so far, while this thread surely leads: from phase 1 on
        // the monitor may depose it (after promote_after) and a follower calls into UCX. Sent
        // after that, on a busy machine, a kick and the new leader's reply were written into
        // one TCP endpoint at once: a client got a garbled message and UCX aborted it.
        flush_lanes();
        last_activity = Clock::now();
        me.job.store(j);
        // The time limit is a kernel's: a push waits for its compile (bounded by the compile
        // service's own limit), and timing it out restarted the worker for every cargo.
        me.kernel = j->type == MsgType::invoke || j->type == MsgType::forward;
        me.since = ns_of(last_activity);
        me.phase = 1;
        monitor->started(me);
        bool failed = false;
        Step r = execute(me, *j, &failed);
        last_activity = Clock::now();  // the spin counts from here: a client's next request follows its reply
        int expected = 1;
        const bool still_leader = me.phase.compare_exchange_strong(expected, 0);
        const bool quick = ns_of(last_activity) - me.since < int64_t(std::chrono::nanoseconds(timing::kBatchRun).count());
        batch = quick ? batch + 1 : 0;
        me.since = 0;
        me.phase = 0;
        me.job.store(nullptr);
        const bool mine = failed || !j->answered.exchange(true);  // else answered `interrupted` meanwhile
        if (still_leader) {
          if (mine) deliver(eps.live(j->ep, j->serial), std::move(r));
          continue;
        }
        if (mine) post(j->ep, j->serial, std::move(r));  // the new leader sends it
        return;
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
            continue;
          }
        }
        if (now - tier_up_since >= timing::kTierUpWait && !tiering.exchange(true)) {
          tier_up_since = {};
          depose(me);
          handler->tier_up();
          tiering = false;
          return;
        }
      }
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
      w->progress_or_wait(Clock::now() < wary_until ? 1 : int(timing::kIdleWait.count()));
      lanes_idle(false);
    }
  }

  // Whether the leader calls UCX's progress now: always, but while lanes are busy and UCX
  // is not (timing::kLaneProgressEvery).
  bool progress_due(Clock::time_point now) {
    if (lanes.empty() || ucx_busy) return true;
    if (now - last_lane_activity > opt.spin || now - last_progress >= timing::kLaneProgressEvery) {
      last_progress = now;
      return true;
    }
    return false;
  }

  bool tls_queued() const { return front && front->queued_total() > 0; }

  // Sends the replies executors and the monitor posted; false if there were none.
  bool drain_outbox() {
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

  // The reply to a request whose kernel was running when the worker had to end.
  Step interrupted(MsgType type, ByteView header) const {
    ResultMsg m;
    m.request_id = request_id_of(type, header);
    m.status = ReplyStatus::interrupted;
    m.node_id = opt.node_id;
    m.message = "the kernel was running when another kernel's failure made the node replace its worker; it may have "
                "partly run (its writes to node memory stay)";
    return Step{{MsgType::result, encode(m), {}}, reply_to_of(type, header)};
  }
  // A request this worker will not run because it is ending: `restarting`, which the client
  // sends again to the next worker; a forward, whose chain already ran elsewhere, tells its
  // client `interrupted`.
  void unrun(Ep ep, MsgType type, ByteView header) {
    if (type == MsgType::forward) return deliver(nullptr, interrupted(type, header));
    if (!ep) return;
    send(ep, {MsgType::result, restarting_header(type, header), {}});
  }
  // The header of the `restarting` result that answers a request this worker did not run.
  Bytes restarting_header(MsgType type, ByteView header) const {
    ResultMsg m;
    m.request_id = request_id_of(type, header);
    m.status = ReplyStatus::restarting;
    m.node_id = opt.node_id;
    m.message = ending_why;
    return encode(m);
  }

  // After a kernel crash or time-out: the replies are sent, then the worker process ends
  // at once (threads still inside kernels cannot be stopped any other way) and the
  // supervisor starts a fresh one.
  void flush_and_quit() {
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
        deliver(eps.live(j->ep, j->serial), interrupted(j->type, j->header));
      }
    answer_the_rest();
    for (const std::shared_ptr<Lane>& l : lanes) l->mark_ended();  // no more polls: its client sends the rest elsewhere
    handler->flush_runs(true);
    flush_log();
    _exit(75);
  }

  // An orderly end (SIGTERM, the loader stopping or a kernel's own signal), once every
  // executor has returned: their kernels ran to the end and their replies are in the
  // outbox. What was queued or arrives from now on did not run: `restarting`, so that a
  // client sends it again to the next worker (or finds the loader gone), instead of losing
  // its connection with a request that may or may not have run (seen in e2e.adversary_tcp:
  // a client that connected during the 50 ms before this worker saw its stop).
  void end_in_order() {
    if (!listener) return;  // never served (a standby told to stop): nobody to answer
    ::prctl(PR_SET_NAME, "xcargo-ending");  // the main thread's name is the process's in ps and pgrep
    ending_why = "the node is stopping or replacing its worker; this request did not run: send it again";
    restart = true;  // on_request and the lanes answer `restarting` from now on
    flush_lanes();
    release_port();
    answer_the_rest();
  }

  // No new connections to a worker about to go: a client reconnecting at once must reach
  // the next worker, not this one (its transport ports vanish with it).
  void release_port() {
    if (front) front->stop_listening();
    if (!listener) return;
    UCX->ucp_listener_destroy(listener);
    listener = nullptr;
    if (opt.on_port_released) opt.on_port_released();
  }

  // The end of an ending worker: queued requests answered `restarting`, every reply sent,
  // and time for the clients to read them.
  void answer_the_rest() {
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
    } while ((in_flight > 0 || tls_queued()) && Clock::now() < deadline);
    // Linger until the clients answered have closed their connections: a reply sent is not
    // yet read, and a client that sees the connection drop first (UCX fails its endpoint on
    // the closed connection-manager socket before it reads the data socket) reports a lost
    // node instead of the reply; seen on a busy machine, with the client not yet scheduled.
    // At least kLingerReplies (results sent to forwarded chains' clients, which do not close
    // this worker's connections to them), at most kLingerForClose; asleep between events.
    const auto start = Clock::now();
    auto open = [&] {
      return std::any_of(answered_ending.begin(), answered_ending.end(), [&](Ep ep) { return eps.find(ep) != nullptr; });
    };
    while (true) {
      const auto now = Clock::now();
      const bool wanted = now - start < timing::kLingerReplies || ((in_flight > 0 || tls_queued()) && now < deadline) ||
                          (open() && now - start < timing::kLingerForClose);
      if (!wanted) break;
      drain_outbox();
      if (!lanes.empty()) poll_lanes();
      flush_lanes();
      if (front) front->poll();
      w->progress_or_wait(1);
    }
  }

  void executor(Slot& me) {
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

  // The monitor's hooks. depose: a follower leads while me finishes its request.
  void depose(Slot& s) {
    std::lock_guard<std::mutex> l(lead_mu);
    if (leader == &s) {
      leader = nullptr;
      vacant = true;
      lead_cv.notify_one();
    }
  }
  // Sets quit and wakes every thread start_threads started but the monitor's, so that each
  // returns (stop_monitor: the monitor's).
  void stop_threads() {
    quit = true;
    w->wake();
    if (probe) probe->wake();
    lead_cv.notify_all();
  }
  void stop_monitor() {
    monitor_quit = true;
    monitor->stop();
    if (monitor_thread.joinable()) monitor_thread.join();
  }
  // The engine's load hook (Engine::on_load): a request that loads its cargo (kept by an
  // earlier worker, or carried by a forward) is timed by the request limit while it loads,
  // like a push; its kernel's time limit counts from the load's end. Inline runs never load.
  void loading(bool starting) {
    Slot* s = t_guarded_slot;
    if (!s || s->phase.load() == 0 || s->phase.load() == 3) return;
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
  // s ran past the limit: its client is told, then the worker restarts.
  void time_out(Slot& s) {
    const std::string what = s.kernel ? "the kernel ran past the time limit of " + limit_text()
                                      : "the request (no kernel: a push, or a cargo loading before its kernel runs) ran past its limit of " +
                                            std::to_string(request_limit().count()) + " s";
    const bool inline_run = s.phase.load() == 3;
    set_incident(what);
    // Ending before the reply leaves: a client that gets it and sends at once must be
    // answered `restarting`, not have its next kernel run in this worker.
    restart = true;
    if (inline_run) {
      loader::time_out(s);  // its own thread logs and answers (failure_reply)
    } else if (std::shared_ptr<Job> j = s.job.load(); j && !j->answered.exchange(true)) {
      const std::string a = about(j->type, j->header, j->origin.get());
      report_failure("failed invoke: " + what + a + "; restarting the worker", what + a);
      ResultMsg m;
      m.request_id = request_id_of(j->type, j->header);
      m.status = ReplyStatus::timeout;
      m.message = what + " and was stopped; the node recovered";
      post(j->ep, j->serial, Step{{MsgType::result, encode(m), {}}, reply_to_of(j->type, j->header)});
    } else {
      log("failed invoke: " + what + "; restarting the worker");
    }
    w->wake();
  }
};

UcxServer::UcxServer() : impl_(std::make_unique<Impl>()) {}

UcxServer::~UcxServer() {
  if (impl_->handler) {
    impl_->handler->set_transport_counters({});
    impl_->handler->on_load({});
  }
  if (!impl_->w) return;
  if (std::any_of(impl_->threads.begin(), impl_->threads.end(), [](const std::thread& t) { return t.joinable(); })) {
    impl_->stop_threads();  // started, but run() never came (a start-up failure)
    for (auto& t : impl_->threads)
      if (t.joinable()) t.join();
  }
  if (impl_->monitor_thread.joinable()) impl_->stop_monitor();
  impl_->front.reset();  // its connections, closed
  for (const auto& [ep, client] : impl_->eps.all())
    if (ep.ucx()) Impl::close_ep(ep.ucx());
  for (const auto& [id, peer] : impl_->peers->all())
    if (peer.ep.ucx()) Impl::close_ep(peer.ep.ucx());  // TLS ones went with the front door
  for (ucp_ep_h ep : impl_->orphans) Impl::close_ep(ep);
  if (Regions* regions = impl_->handler->regions_if_open()) {
    for (const auto& [name, length] : regions->list())
      if (Region* r = regions->find(name); r && r->ucx_memh) {
        UCX->ucp_mem_unmap(impl_->w->context(), static_cast<ucp_mem_h>(r->ucx_memh));
        r->ucx_memh = nullptr;
      }
  }
  impl_->eps.clear();
  impl_->peers->clear();
  if (impl_->listener) UCX->ucp_listener_destroy(impl_->listener);
  for (int i = 0; i < 100; ++i) UCX->ucp_worker_progress(impl_->w->worker());
}

std::string UcxServer::address() const { return impl_->address; }
std::string UcxServer::tls_address() const { return impl_->tls_address; }

Status UcxServer::listen(std::chrono::milliseconds wait) {
  Impl& m = *impl_;
  if (m.listener) return {};
  const auto deadline = Clock::now() + wait;
  // UCX logs each failed bind: quiet while the port is still held (restored after).
  char level[32] = "";
  bool quiet = false;
  Status listening;
  for (;;) {
    auto listener = net::listen(m.w->worker(), m.opt.listen, &Impl::on_conn, &m, &m.address);
    if (listener.ok()) {
      m.listener = *listener;
      break;
    }
    if (Clock::now() >= deadline) {
      listening = listener.take_error();
      break;
    }
    if (!quiet && UCX->ucs_global_opts_get_value("LOG_LEVEL", level, sizeof level) == UCS_OK)
      quiet = UCX->ucs_global_opts_set_value("LOG_LEVEL", "fatal") == UCS_OK;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  if (quiet) (void)UCX->ucs_global_opts_set_value("LOG_LEVEL", level);
  XC_TRY(listening);
  if (!m.opt.tls_listen.empty() && !m.front)
    XC_TRY(m.open_front_door(std::chrono::duration_cast<std::chrono::milliseconds>(std::max(deadline - Clock::now(), Clock::duration::zero()))));
  if (m.probe) m.probe->aim(m.address);
  return {};
}

Result<std::unique_ptr<UcxServer>> UcxServer::start(const ServerOptions& options, Handler& handler, Log log,
                                                    char* incident, size_t incident_size) {
  std::unique_ptr<UcxServer> s(new UcxServer());
  Impl& m = *s->impl_;
  m.opt = options;
  m.opt.executors = std::max(1u, options.executors);
  m.handler = &handler;
  handler.set_transport_counters([&m]() -> std::vector<Counter> {
    return {{"lanes_opened", m.lanes_opened.load()}, {"lane_requests", m.lane_requests.load()}};
  });
  m.log = std::move(log);
  m.incident = incident;
  m.incident_size = incident_size;
  const char* lanes = std::getenv("XCARGO_LANES");  // 0: peers' forwards through UCX only, as clients'
  Peers::LaneTo lane_to;
  if (!(lanes && std::string(lanes) == "0"))
    lane_to = [](const std::string& address) {
      auto a = net::parse_host_port(address);
      return a.ok() && net::on_this_host(*a);
    };
  m.admission = std::make_unique<Intake>(m.eps, *m.opt.gate, m, m.log, m.largest_request(), m.largest());
  m.peers = std::make_unique<Peers>(m.opt.cluster, m.opt.gate->node_key(), m.link, m.log, std::move(lane_to),
                                    [gate = m.opt.gate](const RawKey& key) { return gate->is_peer_key(key); });
  if (auto addr = net::parse_host_port(options.listen); !addr.ok()) return addr.take_error();  // before UCX starts
  // Without trusted-network, UCX takes no connection from another host (main.cpp refuses a
  // listen address that is not loopback then): its own tcp ports stay on loopback too.
  auto w = net::UcxWorker::create(true, options.one_sided_regions, !options.trusted_network);  // one thread at a time: the leader
  XC_TRY(w);
  m.w = std::move(*w);
  if (options.one_sided_regions) {
    std::string soft;
    for (const std::string& tl : m.w->transports())
      if (!net::enforces_memory_keys(tl) && tl != "self") soft += (soft.empty() ? "" : ", ") + tl;
    if (!soft.empty() && !options.trusted_network)
      return Error(Errc::invalid_argument,
                   "one-sided-regions: the transports UCX may use here (" + soft + ") emulate one-sided access in "
                   "software and check no memory key: any peer that connects could read and write all of this "
                   "worker's memory")
          .hint("without one-sided-regions, clients read regions through requests the loader checks (the default)")
          .hint("set trusted-network: true as well only if every host that can reach this loader is trusted");
    if (!soft.empty())
      m.log("warning: one-sided-regions on a trusted network: peers can read and write this worker's memory over " + soft);
    else
      m.log("one-sided-regions: clients read regions with ucp_get; the network hardware checks their keys");
  }
  auto handle = [&m](uint16_t t, ucp_am_recv_callback_t cb) {
    m.args[t] = {&m, t};
    ucp_am_handler_param_t hp{};
    hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG |
                    UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
    hp.id = t;
    hp.cb = cb;
    hp.arg = &m.args[t];
    hp.flags = UCP_AM_FLAG_WHOLE_MSG;
    return UCX->ucp_worker_set_am_recv_handler(m.w->worker(), &hp);
  };
  // Every id a message can carry gets a handler, the highest first (UCX grows its table once):
  // UCX 1.13 leaves the slots of unregistered ids uninitialized and jumps through them (a
  // message of type 0 or 4, or 16384 and up, crashed the worker).
  for (uint32_t t = kAmIds; t-- > 0;) {
    const bool ours = t <= kMaxMsgType, request = ours && t % 2 == 1;
    const bool greeting =
        t == uint16_t(MsgType::hello_reply) || t == uint16_t(MsgType::auth_reply) || t == uint16_t(MsgType::lane_reply);
    if (auto st = handle(uint16_t(t), request ? &Impl::on_request : greeting ? &Impl::on_peer_reply : &Impl::on_stray); st != UCS_OK)
      return net::ucx_error("UCX handler for message type " + std::to_string(t), st);
  }
  SelfProbe::Options po;  // aimed at the listener once there is one
  po.loopback_only = !options.trusted_network;
  auto probe = SelfProbe::start(po);
  XC_TRY(probe);
  m.probe = std::move(*probe);
  if (options.listen_at_start) XC_TRY(s->listen());
  for (unsigned i = 0; i < m.opt.executors; ++i) m.slots.push_back(std::make_unique<Slot>());
  m.monitor = std::make_unique<Monitor>(m.slots, m.opt.promote_after, std::chrono::nanoseconds(int64_t(m.opt.timeout_s * 1e9)),
                                        Monitor::Hooks{[&m](Slot& s) { m.depose(s); }, [&m](Slot& s) { m.time_out(s); }, [&m] {
                                                         m.end_lanes_at_forced_end();
                                                         m.handler->flush_runs(true);
                                                         flush_log();  // the restart did not complete: force it
                                                         _exit(75);
                                                       }}, m.request_limit());
  m.handler->on_load([&m](bool loading) { m.loading(loading); });
  install_fault_handlers();
  return s;
}

void UcxServer::start_threads(const std::atomic<bool>& stop) {
  Impl& m = *impl_;
  if (m.started) return;
  m.started = true;
  {
    std::lock_guard<std::mutex> l(m.lead_mu);
    m.vacant = false;  // nobody leads (serves) before run(): the sandbox may not be complete yet
  }
  std::vector<std::thread>& threads = m.threads;
  m.monitor_thread = std::thread([&] { m.monitor->run(m.monitor_quit); });
  if (m.probe)
    threads.emplace_back([&] {
      m.probe->run(m.quit, m.progress_calls, [&](const std::string& why) {
        m.report_failure(why + "; restarting the worker", why);
        m.restart = true;
        m.w->wake();
      });
    });
  for (size_t i = 1; i < m.slots.size(); ++i) threads.emplace_back([&, i] { m.executor(*m.slots[i]); });
  threads.emplace_back([&m, &stop] {  // turns the stop flag (set by a signal handler) into quit
    while (!m.quit && !stop.load()) std::this_thread::sleep_for(timing::kStopPoll);
    m.stop_threads();
  });
}

void UcxServer::run(const std::atomic<bool>& stop) {
  Impl& m = *impl_;
  start_threads(stop);
  {
    std::lock_guard<std::mutex> l(m.lead_mu);
    m.vacant = true;
  }
  m.executor(*m.slots[0]);
  for (auto& t : m.threads) t.join();
  m.stop_monitor();  // every kernel has ended (or timed out, and the monitor ended the process)
  m.end_in_order();
  m.handler->flush_runs(true);
}

}  // namespace xcargo::loader
