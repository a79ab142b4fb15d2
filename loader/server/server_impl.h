// UcxServer::Impl: the worker's serving state, shared by the server's parts. Each section
// names the file that defines its functions: ucx_server.cpp (UCX: listener, endpoints, its
// callbacks and sends, regions; the public UcxServer), server_tls.cpp (the TLS front door),
// server_requests.cpp (a request's way in and its reply's way out), server_lanes.cpp
// (shared-memory lanes), server_forwards.cpp (peers, forwards and relayed results),
// server_executors.cpp (the leader/follower pool and the monitor's hooks), server_end.cpp
// (the worker's end). Internal to the loader's server: only those files include it.
#pragma once

#include <ucp/api/ucp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "server/connections.h"
#include "server/door_channel.h"
#include "server/front_door.h"
#include "server/intake.h"
#include "server/jobs.h"
#include "server/kernel_guard.h"
#include "server/lane.h"
#include "server/line_limit.h"
#include "log.h"
#include "server/monitor.h"
#include "server/peers.h"
#include "server/self_probe.h"
#include "timing.h"
#include "server/transport.h"
#include "server/ucx_server.h"
#include "common/large_buffers.h"
#include "net/ucx.h"

namespace xcargo::loader {

namespace server_detail {
// Where a failure of this request is reported: a forward's client, by address; else empty
// (the requesting endpoint).
inline Bytes reply_to_of(wire::MsgType type, ByteView header) {
  if (type == wire::MsgType::forward)
    if (auto f = wire::decode_forward(header); f.ok()) return f->reply_address;
  return {};
}
inline std::string short_hex(const Digest& d) { return to_hex(ByteView(d).first(8)); }
inline constexpr uint32_t kAmIds = 65536;  // UCX's Active Message ids are 16 bits
}  // namespace server_detail

struct UcxServer::Impl : IntakeHost {
  using MsgType = wire::MsgType;

  // ---- Shared by every part.
  ServerOptions opt;
  Handler* handler = nullptr;
  Log log;
  char* incident = nullptr;
  size_t incident_size = 0;
  std::unique_ptr<net::UcxWorker> w;
  Connections eps;  // clients of either transport; touched only by the leader
  JobQueue jobs;
  // The transports: UCX, whose endpoints are the Ep that are not TLS (a test puts a fake in
  // its place), and the TLS front door, if the loader has one. sleeper: UCX's, which also
  // wakes for the front door's descriptor.
  std::unique_ptr<Transport> ucx_transport, tls_transport;
  Sleeper* sleeper = nullptr;
  Transport& transport(Ep ep) { return ep.is_tls() ? *tls_transport : *ucx_transport; }
  // One poll of each transport: whether any did anything.
  bool progress_all() {
    bool busy = ucx_transport->poll();
    if (tls_transport && tls_transport->poll()) busy = true;
    return busy;
  }
  bool sending() const { return ucx_transport->sending() || (tls_transport && tls_transport->sending()); }
  bool served = false;  // it listened (a standby told to stop before it did has nobody to answer)
  std::atomic<bool> restart{false};  // this worker is ending: what comes from now on does not run
  std::atomic<bool> quit{false};

  // A request that runs no kernel (a push waiting for the compile service, which may be
  // compiling another cargo's -O2 code for up to its own limit): timed out only past that.
  std::chrono::seconds request_limit() const {
    return std::max(std::chrono::seconds(int64_t(std::ceil(opt.timeout_s))), timing::kPastCompileLimit);
  }
  std::string limit_text() const {
    char s[32];
    std::snprintf(s, sizeof s, "%g s", opt.timeout_s);
    return s;
  }
  // The limit slot s's kernel ran under: its request's own where that is shorter.
  std::string limit_text(const Slot& s) const {
    const int64_t own = s.limit_ns.load(std::memory_order_relaxed);
    if (own <= 0 || double(own) >= opt.timeout_s * 1e9) return limit_text();
    char t[96];
    std::snprintf(t, sizeof t, "%g s (its request's own; the node's is %g s)", double(own) / 1e9, opt.timeout_s);
    return t;
  }
  uint64_t largest_request() const { return std::max(handler->max_cargo(), handler->max_input()); }
  // The unit of the byte limits in flight (in_flight.h): the largest request or reply.
  uint64_t largest() const { return std::max(largest_request(), handler->max_reply()); }
  // A failure that ends this worker: its line written at once, then the incident page the
  // supervisor reads (and kills a worker still there kEndingGrace later): the line is on record
  // before anything can end this process.
  void report_failure(const std::string& line, const std::string& incident_text);
  void set_incident(const std::string& what) {
    if (!incident || !incident_size) return;
    size_t n = std::min(what.size(), incident_size - 1);
    std::memcpy(incident, what.data(), n);
    incident[n] = '\0';
  }
  // What start() does that needs no transport: the rules of intake, the peers, the executors'
  // slots, the monitor and the engine's load hook (its options, handler and log set).
  void init_parts();
  // A count only the leader adds to: a plain load and store, not a locked add (a barrier).
  static void bump(std::atomic<uint64_t>& count) {
    count.store(count.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
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

  // ---- UCX (ucx_server.cpp).
  ucp_listener_h listener = nullptr;
  std::string address;
  // Floods, logged by Tally (line_limit.h).
  Tally rejected;  // connections refused for too many from their host (Connections::admit)
  Tally made_room;  // connections still to authenticate closed for newer ones (Connections::make_room)
  // Before admitting a connection from host: the oldest still to authenticate makes way if
  // its host's (or all hosts') are at their limit (logged at most once a second).
  void make_room_for(const std::string& host);
  Tally failed_accepts;
  Tally noreply;   // requests without a reply endpoint
  Tally strays;    // messages of types that are not requests
  std::set<ucp_ep_h> orphans;  // failed peer endpoints awaiting their error callback
  std::atomic<int> in_flight{0};  // sends UCX has not completed
  bool ucx_busy = false;  // the last progress call did something
  // Until then the idle leader sleeps at most 1 ms at a time: UCX 1.13 over tcp does not always
  // wake a waiting worker for the first messages of a new connection (kWaryAfterConnect).
  Clock::time_point wary_until{};
  const Client* last_accepted = nullptr;  // compared only: the probe's own connection is no cause to be wary
  struct HandlerArg {
    Impl* self;
    uint16_t type;
  };
  std::vector<HandlerArg> args = std::vector<HandlerArg>(server_detail::kAmIds);

  static void on_conn(ucp_conn_request_h req, void* arg);
  static void on_ep_error(void* arg, ucp_ep_h ep, ucs_status_t);
  // Completion callbacks release their request: a request freed earlier gets no callback.
  static void on_data(void* request, ucs_status_t status, size_t, void* user);
  static void on_sent(void* request, ucs_status_t status, void* user);
  static ucs_status_t on_request(void* arg, const void* header, size_t header_length, void* data, size_t length,
                                 const ucp_am_recv_param_t* param);
  // Messages of types no peer may send this node: dropped, and counted in the log.
  static ucs_status_t on_stray(void* arg, const void*, size_t, void*, size_t, const ucp_am_recv_param_t*);
  // hello_reply, auth_reply and lane_reply from peers this node greeted: it proves itself with
  // its node key, then sends what waited. Anyone can send these; what answers nothing this
  // node asked (Peers: signatures, random request ids) is counted and logged as a stray.
  static ucs_status_t on_peer_reply(void* arg, const void* header, size_t header_length, void*, size_t,
                                    const ucp_am_recv_param_t*);
  // on_fail runs if the message cannot be delivered (the peer went away).
  // flags: UCP_AM_SEND_FLAG_REPLY on messages to peers, whose answers must name this endpoint.
  // unread: where the reply counts among unread replies while it waits for its client.
  void send_on(ucp_ep_h ep, Reply&& r, std::function<void(ucs_status_t)> on_fail = {}, uint32_t flags = 0,
               std::shared_ptr<Usage> unread = {}, std::shared_ptr<Usage> unread_key = {});
  static void close_ep(ucp_ep_h ep);
  // Where a region is, with its remote key: registered with UCX on first request.
  void region(Ep ep, ByteView header);
  // A request's data sent by rendezvous: fetched into job's buffer, which is ready once it
  // has arrived whole (on_data).
  void fetch(Job& job, void* data, size_t length);

  // ---- The same-host door's worker side (server_door.cpp, wire-protocol.md 2.4): the
  // supervisor's keeper offers clients this worker's address with a ticket and tells it here
  // first; a client's `door` message with that ticket makes the endpoint it came on a client
  // connection. Those endpoints have no error callback: the keeper's `gone` ends them.
  int door_fd = -1;  // this worker's end of the keeper's channel (-1: no door)
  struct DoorTicket {
    uint64_t id = 0;
    uint32_t pid = 0, uid = 0;
    Clock::time_point at{};
  };
  std::map<door::Ticket, DoorTicket> door_tickets;  // offered, not yet claimed
  std::map<Ep, uint64_t> door_ids;                  // claimed: the keeper's id of each
  Tally door_strays;  // `door` messages with no ticket of ours, or on a known endpoint
  void door_tell(const door_channel::Message& m) const;
  // Reads what the keeper said (new tickets, clients gone). Leader only, as all below.
  void door_read();
  // The channel ended: no more tickets come, so no new same-host client (opt.on_door_lost).
  void door_lost();
  void door_claim(ucp_ep_h ep, ByteView header);
  // The self probe's ticket when this worker has no UCX listener: claims a connection any
  // number of times (only this process knows it), as the probe's.
  door::Ticket probe_ticket{};
  // Peers' doors the keeper opens for this worker (Link::dial), by the dial's number (the
  // high bit set, so that no number of the keeper's own is one).
  struct DoorDial {
    std::string address;
    door::Ticket ticket{};  // the peer's, sent in the `door` message (kept until the dial ends)
    Ep ep;                  // once dialed
  };
  std::map<uint64_t, DoorDial> door_dials;
  uint64_t next_dial = uint64_t(1) << 63;
  uint64_t door_dial(const std::string& host_port);
  void door_dialed(const door_channel::Message& m);
  // The dial that made ep, if one did: its lifeline is released (the keeper closes it).
  void door_undial(Ep ep);
  // c's connection closes here: the keeper closes its lifeline, and its client knows.
  void door_forget(Ep ep);
  // Unclaimed tickets older than the authentication deadline go, and their lifelines.
  void door_sweep(Clock::time_point now);
  static ucs_status_t on_door(void* arg, const void* header, size_t header_length, void*, size_t,
                              const ucp_am_recv_param_t* param);

  // ---- The TLS front door, if the loader has one (server_tls.cpp, front_door.h): its
  // connections are clients like UCX's, in eps under Ep::tls.
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
  std::shared_ptr<tls::Context> peer_tls;  // this worker as a client of its peers' front doors
  // Peers' front doors the keeper dials for this worker (Link::dial; numbered as door_dials):
  // the worker opens no socket. By the dial's number, its HOST:PORT.
  std::map<uint64_t, std::string> tls_dials;
  uint64_t tls_dial(const std::string& host_port);                           // 0: not through the keeper
  void tls_dialed(uint64_t id, int fd, const std::string& what);             // FrontDoor::Events::dial_answer

  // The front door's settings: a TLS key of this worker's, certified by the node key (the key
  // service's), and who may complete a handshake (AuthGate::admits).
  Result<std::shared_ptr<tls::Context>> tls_context() const;
  // A fresh certificate well before the last one ends (timing::kRenewTls); a failure keeps
  // the old one and tries again a minute later.
  void renew_tls(Clock::time_point now);
  // The same credential, as a client of other nodes' front doors: they must prove a node key
  // of the cluster's (a peer key, as AuthGate::admits asks of nodes).
  Result<std::shared_ptr<tls::Context>> peer_tls_context() const;
  Status open_front_door(std::chrono::milliseconds wait);
  // Why a reply of `size` bytes would pass c's limit of unread replies (what its socket has
  // not taken); empty if it would not.
  std::string tls_unread_over_limit(const TlsConn& c, uint64_t size) const;

  // ---- A request's way in, and its reply's way out (server_requests.cpp). Leader only.
  Clock::time_point next_sweep{};
  Tally receive_failures;  // requests whose header was too long or whose data did not arrive

  // A request, from UCX (on_request), the front door or a lane (poll_lanes; never
  // rendezvous). ep: its connection, null for a forward that came without one. lane: the
  // lane it came through. owned: data's buffer, which a queued request takes over instead of
  // copying it (TLS).
  void intake(MsgType type, Ep ep, const uint8_t* header, size_t header_length, void* data, size_t length, bool rndv,
              const std::shared_ptr<Lane>* lane = nullptr, Bytes* owned = nullptr);
  // A reply on an accepted endpoint (none if the client went away). A client that does not
  // take its replies cannot make the worker keep them without bound: past the limits in
  // flight its connection is closed.
  void send(Ep ep, Reply&& r) override;
  // A reply counted among its client's unread replies until its transport has taken it.
  void send_counted(Ep ep, Client& c, Reply&& r);
  // Closes a client's connection, whichever transport carries it.
  void close_conn(Ep ep);
  // Closes connections that were refused, that did not authenticate in time, or whose
  // transfer stopped.
  void sweep();

  // ---- Shared-memory lanes (server_lanes.cpp, lane.h; wire-protocol.md 8.1).
  std::vector<std::shared_ptr<Lane>> lanes;  // polled by the leader; a Client holds each too
  std::atomic<uint64_t> lanes_opened{0}, lane_requests{0};  // for stats replies
  bool lane_batch = false, batch_marked = false;  // leader only: in poll_lanes; its slot marked (mark_inline)
  Clock::time_point last_lane_activity{}, last_progress{};  // progress_due
  Tally lane_failures;

  // A lane for the connection: one per connection, kMaxLanes per worker.
  void open_lane(Ep ep, Client* c, ByteView header);
  // Lanes whose connection is gone, or that broke, are polled no more.
  void reap_lanes() {
    std::erase_if(lanes, [](const std::shared_ptr<Lane>& l) { return l.use_count() == 1 || l->broken(); });
  }
  // Leader only: the requests waiting in each lane, up to timing::kReadyBatch from each.
  // Whether any came.
  bool poll_lanes();
  // Requests only (a client's, and a peer node's forwards): not the handshake, lanes
  // themselves, replies or unknown types.
  static bool by_lane(MsgType t) {
    switch (t) {
      case MsgType::push: case MsgType::has: case MsgType::invoke: case MsgType::list: case MsgType::stats:
      case MsgType::region: case MsgType::region_read: case MsgType::forward: return true;
      default: return false;
    }
  }
  // Before the leader sleeps: tells the lanes' clients to kick it, then looks once more.
  // False: a request came meanwhile (no sleep).
  bool lanes_idle(bool idle);
  // After replies written into lane l: if its client sleeps, a kick through UCX wakes it,
  // counted as a reply it has not read (else a client that set its idle flag and never let
  // UCX deliver would have the worker queue a kick per reply, uncounted).
  void flush_lane(const std::shared_ptr<Lane>& l);
  // Every lane's replies not flushed yet: before the leader runs a request that may take a
  // while, or the worker ends.
  void flush_lanes();
  // The monitor's, when the worker must end and no thread did: a kernel that blocked the
  // time-out signal spins, run inline by the leader (an inline run is not deposed), so no
  // thread answers what is left. Through the lanes, shared memory only (the stuck thread may
  // be inside UCX's receive callback): the staged replies, of requests that ran before that
  // kernel in its lane batch, are written, and each request still waiting in a lane is
  // answered `restarting`, which its client sends again to the next worker. Requests that
  // came through UCX and wait in the queue are not answered (SECURITY.md, what is not
  // protected). A live leader would have ended the worker itself (flush_and_quit), so the
  // leader is inside that kernel and no thread touches the lanes; lead_mu keeps a follower
  // from taking the lead meanwhile. No kick: the process ends next, which wakes a sleeping
  // client, and its library reads its lane before it reports the connection lost.
  void end_lanes_at_forced_end();

  // ---- Peer nodes, forwards and relayed results (server_forwards.cpp).
  // Connections to other loaders, by node id, through Link: UCX, or TLS to a node whose
  // address is tls://HOST:PORT (dialed through the front door, with peer_tls).
  struct Link : PeerLink {
    Impl* self;
    explicit Link(Impl* s) : self(s) {}
    Ep connect(const std::string& address, std::string* why) override;  // ucx_server.cpp
    uint64_t dial(const std::string& address) override;                  // ucx_server.cpp
    void send(Ep ep, Reply&& r, Failed on_fail) override { self->transport(ep).send_peer(ep, std::move(r), std::move(on_fail)); }
    void close(Ep ep) override { self->close_conn(ep); }
  } link{this};
  std::unique_ptr<Peers> peers;
  // Clients by their relay id (their reply_address: wire-protocol.md 4.13); an entry is good
  // while eps has its connection with that id.
  std::map<uint64_t, Ep> relays;
  Tally relays_lost;  // relayed results whose client had gone, or that could not reach its node
  std::atomic<uint64_t> bad_relays{0};  // relays dropped (relayed())
  wire::ForwardEncoder forwards;  // leader only, as deliver()
  // What a forward's failure must tell its client, for the forwards in flight (leader only).
  // The failure callback holds a serial, within std::function's own storage (not the whole
  // Forward: an allocation and its free per hop), and the record is reused kForwardFates
  // forwards later, its buffers with it.
  struct ForwardFate {
    uint64_t serial = 0;
    uint32_t node = 0;
    Ep ep;
    wire::Forward f;
  };
  static constexpr size_t kForwardFates = 4096;  // past this many in flight, a failure's record is gone (logged)
  std::vector<ForwardFate> fates;  // grows to kForwardFates as forwards are sent
  uint64_t fates_made = 0;

  // Sends what one step produced: its result to whoever waits for it, or the computation
  // on to its next node (with the cargo, the first time this peer gets it from here).
  void deliver(Ep ep, Step&& step);
  // Where a forwarded chain's result for ep's client goes: a relay address naming this node
  // and the connection (wire-protocol.md 4.13), made on its first invoke, whichever the
  // transport; the address a client's hello names is not used.
  const Bytes& client_address(Ep ep);
  // A result for a client by its address (the end of a forwarded chain): always a relay
  // address its own node made (wire-protocol.md 4.13). Any other address is dropped: this
  // node never creates an endpoint from bytes a client or a peer wrote (UCX aborts on a
  // malformed worker address, and a valid one would have it dial whatever the writer chose).
  void send_to_address(const Bytes& address, Reply&& r);
  // A result for a client of a node (wire-protocol.md 4.13): to its connection here, or in a
  // relay to the node it is connected to.
  void relay_result(const wire::RelayAddress& to, Reply&& r);
  void deliver_relayed(uint64_t id, Reply&& r);
  // A relay from a peer node (intake screened it: a key with the verb forward).
  void relay_in(ByteView header, void* data, size_t length, Bytes* owned);
  // A relay's header, if it decodes and its data is no larger than a reply may be (else
  // dropped, counted in the log). Any thread: logged at the 1st, 2nd, 4th, 8th... such.
  std::optional<wire::Relay> relayed(ByteView header, uint64_t length);
  // Whether a message answered this node's greeting of a peer (else the caller counts it).
  bool peer_reply(MsgType type, ByteView hv);
  uint64_t remember_forward(const wire::Forward& f, uint32_t node, Ep ep);
  void forward_failed(uint64_t n, const std::string& why);
  // A forward that could not reach its node: its client gets an `unreachable` result.
  void undelivered(const wire::Forward& f, uint32_t node, const std::string& why);

  // ---- The executors: leader and followers, and the monitor's hooks (server_executors.cpp;
  // loader/README.md, "Threads").
  std::mutex lead_mu;
  std::condition_variable lead_cv;
  bool vacant = true;
  Slot* leader = nullptr;
  std::vector<std::unique_ptr<Slot>> slots;
  std::unique_ptr<Monitor> monitor;
  // The leader's clock reading at the start of its current turn (steady ns), refreshed by
  // each kernel's end: the start a request it runs inline is stamped with (for the monitor, a
  // few microseconds early at most). 0 outside a turn (asleep, not leading): then run_inline
  // reads the clock. A read costs 25 to 70 ns on a VM: this one, of the three on an
  // inline invocation's path, was 4 % of a lane round trip in a quick phase.
  std::atomic<int64_t> turn_ns{0};
  std::atomic<uint64_t> progress_calls{0};  // the leader's, for the probe
  std::unique_ptr<SelfProbe> probe;
  // Replies from threads that are no longer leader.
  std::mutex outbox_mu;
  struct Posted {
    Ep ep;
    uint64_t serial;
    Step step;
  };
  std::deque<Posted> outbox;
  std::atomic<bool> outbox_full{false};  // outbox is not empty (set and cleared under outbox_mu)
  std::atomic<bool> tiering{false};  // a thread is in handler->tier_up()
  Clock::time_point tier_up_since{}, last_tier_look{};  // leader only: the tier-up's first look, and its latest
  bool started = false;              // start_threads ran
  std::vector<std::thread> threads;  // what start_threads started; run() joins them
  // The monitor's, stopped last: kernels still running in an orderly end keep their time
  // limit (a kernel that signals its own worker to stop, then spins, cannot keep the worker
  // from ending).
  std::thread monitor_thread;
  std::atomic<bool> monitor_quit{false};

  void executor(Slot& me);
  // The leader's loop: progress, send posted replies, run ready requests. Returns when this
  // thread was deposed while running a request, or on quit.
  void lead(Slot& me);
  // lead's parts below are always inlined into it: it runs for every request.
  // What lead's loop does after a part: go on with the turn, begin the next one, or return (it no longer leads).
  enum class LeadNext { go_on, next_turn, leave };
  // Polls the lanes; if a request came, now (the last kernel's end, or the clock), the activity times and turn_ns move on.
  [[gnu::always_inline]] inline void poll_lanes_in_turn(Clock::time_point& now, Clock::time_point& last_activity);
  // Runs a request taken off the queue, and sends its reply; false: deposed meanwhile, reply posted. Ends the worker on restart.
  [[gnu::always_inline]] inline bool run_taken(Slot& me, const std::shared_ptr<Job>& j, Clock::time_point& last_activity, int& batch);
  // A request its client cancelled while it waited: answered `cancelled` and counted, unless answered already.
  [[gnu::always_inline]] inline void answer_cancelled(Job& j);
  // Idle: a quick tier's -O2 code linked here (next_turn), or awaited while a follower leads (leave); else go_on.
  [[gnu::always_inline]] inline LeadNext tier_up_when_idle(Slot& me, Clock::time_point now, Clock::time_point last_activity);
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
  // Runs one request; a kernel fault comes back here as a "crashed" result.
  // *failed: a kernel fault stopped it (its reply is this step, whatever else happens).
  Step execute(Slot& s, Job& j, bool* failed);
  // Runs an invoke or a forward inside the receive callback when its kernel is known to be
  // quick, so the reply leaves without a hand-off or another progress call. False: not run,
  // queue it.
  bool run_inline(MsgType type, Ep ep, ByteView header, ByteView data);
  // Marks this thread's slot as running a quick kernel inline (Phase::inline_) from now (the turn's
  // clock, or the last kernel's end). The first request of a lane batch (poll_lanes) makes
  // the mark, a sequentially consistent store: the barrier the monitor's protocol needs
  // (Monitor::started). The batch's next requests only move its start on, with a plain store
  // (the monitor, if it looks at the earlier start, wakes early, never late): each kernel's
  // time limit counts from its own start, so that a kernel within its limit cannot get the
  // next one, another client's, timed out and blamed; and no barrier per request waits for
  // the lane stores of the reply before it to reach the cache (spread_counter.h). False:
  // marked already.
  bool mark_inline(Slot& s, int64_t limit_ns);
  // A client's `cancel` of one of its invokes: a queued one is marked (answered `cancelled`
  // at its turn), a running one stopped through the monitor.
  void cancel(Ep ep, const Client* client, ByteView header);
  static void unmark_inline(Slot& s) {
    s.since.store(0, std::memory_order_release);
    s.phase.store(Phase::idle, std::memory_order_release);
  }
  // Back from guarded(): the kernel crashed, or (inline) ran past the limit and was stopped.
  // It may have damaged this process: answer, then restart.
  // about: whose kernel it was (about()). A time-out of a queued request was logged by the
  // monitor, which answered it; an inline one is logged here.
  Reply failure_reply(Slot& s, uint64_t request_id, bool inline_run, const std::string& about);
  // " (cargo DIGEST/ENTRY, signed by ..., from PEER key ...)": whose kernel did not come back.
  std::string about(MsgType type, ByteView header, const std::string* origin) const;
  // A step for the leader to deliver, from a thread that is no longer leader.
  void post(Ep ep, uint64_t serial, Step&& s);
  // Sends the replies executors and the monitor posted; false if there were none.
  bool drain_outbox();
  // The monitor's hooks. depose: a follower leads while s finishes its request.
  void depose(Slot& s);
  // s ran past the limit: its client is told, then the worker restarts.
  void time_out(Slot& s);
  // The engine's load hook (Engine::on_load): a request that loads its cargo (kept by an
  // earlier worker, or carried by a forward) is timed by the request limit while it loads,
  // like a push; its kernel's time limit counts from the load's end. Inline runs never load.
  void loading(bool starting);
  // Sets quit and wakes every thread start_threads started but the monitor's, so that each
  // returns (stop_monitor: the monitor's).
  void stop_threads();
  void stop_monitor();

  // ---- The worker's end (server_end.cpp).
  // What a request this worker will not run is told (`restarting`): why it is ending.
  const char* ending_why = "the node is replacing its worker after a kernel failed; this request did not run: send it again";
  std::set<Ep> answered_ending;  // connections answered since a kernel failure ended this worker

  // After a kernel crash or time-out: the replies are sent, then the worker process ends
  // at once (threads still inside kernels cannot be stopped any other way) and the
  // supervisor starts a fresh one.
  [[noreturn]] void flush_and_quit();
  // An orderly end (SIGTERM, the loader stopping or a kernel's own signal), once every
  // executor has returned: their kernels ran to the end and their replies are in the
  // outbox. What was queued or arrives from now on did not run: `restarting`, so that a
  // client sends it again to the next worker (or finds the loader gone), instead of losing
  // its connection with a request that may or may not have run.
  void end_in_order();
  // No new connections to a worker about to go: a client reconnecting at once must reach
  // the next worker, not this one (its transport ports vanish with it).
  void release_port();
  // The end of an ending worker: queued requests answered `restarting`, every reply sent,
  // and time for the clients to read them.
  void answer_the_rest();
  // The reply to a request whose kernel was running when the worker had to end.
  Step interrupted(MsgType type, ByteView header) const;
  // A request this worker will not run because it is ending: `restarting`, which the client
  // sends again to the next worker; a forward, whose chain already ran elsewhere, tells its
  // client `interrupted`.
  void unrun(Ep ep, MsgType type, ByteView header);
  // The header of the `restarting` result that answers a request this worker did not run.
  Bytes restarting_header(MsgType type, ByteView header) const;
};

}  // namespace xcargo::loader
