// UcxServer: the worker's UCX side (listener and endpoints, the Active Message handlers for
// every id, sends, region registration) and the server's public face: start, listen, run.
// The other parts of the server are beside it (server_impl.h names each file).
#include "server/ucx_server.h"

#include <cstdlib>

#include "exit_codes.h"
#include "server/server_impl.h"
#include "common/large_buffers.h"

namespace xcargo::loader {

using namespace wire;
using namespace server_detail;
namespace {

// A reply in flight: its bytes must live until UCX says the send completed.
struct Sending {
  Bytes header, data;
  std::optional<Charge> unread;  // a reply to a client: counted until the client has taken it
  std::atomic<int>* in_flight;
  std::function<void(ucs_status_t)> on_fail;  // forwards: tell the client
  ~Sending() { release_large(std::move(data)); }  // a large reply's pages serve the next one
};

// UCX as the server's transport (transport.h): its endpoints are the Ep that are not TLS.
class UcxTransport final : public Transport, public Sleeper {
public:
  explicit UcxTransport(UcxServer::Impl& m) : m_(m) {}
  std::string unread_over_limit(Ep, const Client& c, uint64_t size) const override {
    return loader::unread_over_limit(c.usage.get(), c.key_usage.get(), size, m_.largest());
  }
  void send(Ep ep, Reply&& r, Client* unread) override {
    if (!unread) return m_.send_on(ep.ucx(), std::move(r));
    m_.send_on(ep.ucx(), std::move(r), {}, 0, unread->usage, unread->key_usage);
  }
  void send_peer(Ep ep, Reply&& r, Failed on_fail) override {
    std::function<void(ucs_status_t)> failed;
    if (on_fail) failed = [f = std::move(on_fail)](ucs_status_t st) { f(UCX->ucs_status_string(st)); };
    m_.send_on(ep.ucx(), std::move(r), std::move(failed), UCP_AM_SEND_FLAG_REPLY);
  }
  void close(Ep ep) override {
    m_.door_forget(ep);
    m_.door_undial(ep);
    UcxServer::Impl::close_ep(ep.ucx());
  }
  void sweep(std::chrono::steady_clock::time_point now) override { m_.door_sweep(now); }
  // Closed by on_ep_error, which comes once UCX has failed every send on it: closing it
  // here would cancel the others, whose failures must still reach their clients.
  void drop_failed(Ep ep) override { m_.orphans.insert(ep.ucx()); }
  bool poll() override { return UCX->ucp_worker_progress(m_.w->worker()) != 0; }
  bool sending() const override { return m_.in_flight > 0; }
  void stop_listening() override {
    if (!m_.listener) return;
    UCX->ucp_listener_destroy(m_.listener);
    m_.listener = nullptr;
    if (m_.opt.on_port_released) m_.opt.on_port_released();
  }
  void wait(int ms) override {
    m_.w->progress_or_wait(ms);
    m_.door_read();  // what woke it may be the keeper's word, which stays readable until read
  }
  void wake() override { m_.w->wake(); }

private:
  UcxServer::Impl& m_;
};

}  // namespace

void UcxServer::Impl::fetch(Job& job, void* data, size_t length) {
  job.data = take_large(length);
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  p.cb.recv_am = &Impl::on_data;
  p.user_data = &job;
  ucs_status_ptr_t r = UCX->ucp_am_recv_data_nbx(w->worker(), data, job.data.data(), length, &p);
  if (UCS_PTR_IS_ERR(r)) job.failed = true, job.receive_error = UCX->ucs_status_string(UCS_PTR_STATUS(r)), job.ready = true;
  else if (r == nullptr) job.ready = true;  // else on_data completes it
}

// A peer on this host (a loopback HOST:PORT) when this worker has no UCX listener: through
// its same-host door, which the keeper opens for this worker (server_door.cpp).
// A tls:// peer: through the TLS front door's keeper (server_tls.cpp).
uint64_t UcxServer::Impl::Link::dial(const std::string& address) {
  const NodeAddress a = split_scheme(address);
  if (a.scheme == NodeAddress::Scheme::tls) return self->tls_dial(a.host_port);
  if (self->opt.ucx_listener || self->door_fd < 0) return 0;
  if (a.scheme != NodeAddress::Scheme::none) return 0;
  auto hp = net::parse_host_port(a.host_port, nullptr);
  if (!hp.ok() || !net::is_loopback(*hp)) return 0;
  return self->door_dial(a.host_port);
}

// A peer's address: UCX's HOST:PORT, or tls://HOST:PORT, dialed through the front door.
Ep UcxServer::Impl::Link::connect(const std::string& address, std::string* why) {
  if (const NodeAddress a = split_scheme(address); a.scheme == NodeAddress::Scheme::tls) {
    if (!self->front || !self->peer_tls)
      return *why = "it is reached over TLS, and this node has no TLS front door (tls-listen)", nullptr;
    if (self->front->keeper_dials())  // tls_dial could not ask the keeper
      return *why = "the TLS front door's keeper, which makes this worker's connections, could not be asked", nullptr;
    return Ep::tls(self->front->dial(a.host_port, self->peer_tls, why));
  }
  auto ep = net::connect_ep(self->w->worker(), address, &Impl::on_ep_error, self);
  if (!ep.ok()) return *why = ep.error().message(), nullptr;
  return *ep;
}

void UcxServer::Impl::on_conn(ucp_conn_request_h req, void* arg) {
  auto* self = static_cast<Impl*>(arg);
  std::string from = "?";
  ucp_conn_request_attr_t attr{};
  attr.field_mask = UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ADDR;
  if (UCX->ucp_conn_request_query(req, &attr) == UCS_OK) from = net::to_host_port(reinterpret_cast<sockaddr*>(&attr.client_address));
  // One host cannot crowd others out, strangers even less.
  const std::string host = from.substr(0, from.rfind(':'));
  self->make_room_for(host);
  const std::string why = self->eps.admit(host, self->opt.gate->mode() == AuthMode::required);
  // A refused connection is accepted and closed a little later, like a refused client: UCX
  // 1.13's tcp connection manager aborts the process on an assertion when a connection is
  // rejected (ucp_listener_reject), or closed, before its handshake is done and the client
  // goes away meanwhile, as under a flood of connections (guarded by tests/e2e/auth_test.sh,
  // xcargo-conn-flood: "no worker restarted under the connection flood").
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

void UcxServer::Impl::on_ep_error(void* arg, ucp_ep_h ep, ucs_status_t) {
  auto* self = static_cast<Impl*>(arg);  // a client or a peer going away is normal
  if (const Client* c = self->eps.find(ep);
      c && !c->session.authenticated && !c->doomed && !c->probe && self->opt.gate->mode() == AuthMode::required)
    self->log("connection from " + c->peer + " closed without authenticating");
  bool known = self->eps.erase(ep) + self->orphans.erase(ep) > 0;
  if (self->peers->lost(ep)) known = true;
  self->door_undial(ep);
  if (known) close_ep(ep);
}

void UcxServer::Impl::on_data(void* request, ucs_status_t status, size_t, void* user) {
  auto* job = static_cast<Job*>(user);
  if (status != UCS_OK) job->failed = true, job->receive_error = UCX->ucs_status_string(status);
  job->ready = true;
  UCX->ucp_request_free(request);
}

ucs_status_t UcxServer::Impl::on_request(void* arg, const void* header, size_t header_length, void* data, size_t length,
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

void UcxServer::Impl::on_sent(void* request, ucs_status_t status, void* user) {
  auto* s = static_cast<Sending*>(user);
  if (status != UCS_OK && s->on_fail) s->on_fail(status);
  s->in_flight->fetch_sub(1);
  delete s;
  UCX->ucp_request_free(request);
}

void UcxServer::Impl::send_on(ucp_ep_h ep, Reply&& r, std::function<void(ucs_status_t)> on_fail, uint32_t flags,
             std::shared_ptr<Usage> unread, std::shared_ptr<Usage> unread_key) {
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

ucs_status_t UcxServer::Impl::on_stray(void* arg, const void*, size_t, void*, size_t, const ucp_am_recv_param_t*) {
  auto* ha = static_cast<HandlerArg*>(arg);
  if (ha->self->strays.due())
    ha->self->log("dropped a message of type " + std::to_string(ha->type) + " (not a request; " +
                  std::to_string(ha->self->strays.count()) + " such so far)");
  return UCS_OK;
}

ucs_status_t UcxServer::Impl::on_peer_reply(void* arg, const void* header, size_t header_length, void*, size_t,
                                  const ucp_am_recv_param_t*) {
  auto* ha = static_cast<HandlerArg*>(arg);
  const ByteView hv(static_cast<const uint8_t*>(header), std::min(header_length, kMaxHeader));
  if (!ha->self->peer_reply(MsgType(ha->type), hv)) return on_stray(arg, header, header_length, nullptr, 0, nullptr);
  return UCS_OK;
}

void UcxServer::Impl::close_ep(ucp_ep_h ep) {
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  p.flags = UCP_EP_CLOSE_FLAG_FORCE;
  ucs_status_ptr_t r = UCX->ucp_ep_close_nbx(ep, &p);
  if (r && !UCS_PTR_IS_ERR(r)) UCX->ucp_request_free(r);
}

void UcxServer::Impl::region(Ep ep, ByteView header) {
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
    if (!m.opt.ucx_listener) {  // the loader's name only: clients come through the door
      m.address = m.opt.listen;
      m.served = true;
      break;
    }
    auto listener = net::listen(m.w->worker(), m.opt.listen, &Impl::on_conn, &m, &m.address);
    if (listener.ok()) {
      m.listener = *listener;
      m.served = true;
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
  if (!m.opt.ucx_listener || m.door_fd >= 0) {
    auto a = m.w->address();
    XC_TRY(a);
    // Without a listener the probe comes in as a same-host client does, by this worker's
    // address and a ticket of its own (door_claim).
    if (!m.opt.ucx_listener && m.probe) m.probe->aim_at_worker(*a, m.probe_ticket);
    if (m.door_fd >= 0)  // the keeper offers this worker from now on (said once, before any kernel runs)
      m.door_tell(door_channel::Message{door_channel::Kind::address, 0, {}, 0, 0, std::move(*a)});
  }
  if (m.probe && m.opt.ucx_listener) m.probe->aim(m.address);
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
  m.init_parts();
  if (auto addr = net::parse_host_port(options.listen); !addr.ok()) return addr.take_error();  // before UCX starts
  // Without trusted-network, UCX takes no connection from another host (main.cpp refuses a
  // listen address that is not loopback then): its own tcp ports stay on loopback too.
  auto w = net::UcxWorker::create(true, options.one_sided_regions, !options.trusted_network);  // one thread at a time: the leader
  XC_TRY(w);
  m.w = std::move(*w);
  if (options.door_fd >= 0) {
    XC_TRY(m.w->watch(options.door_fd));  // a sleeping leader wakes for the keeper's word
    m.door_fd = options.door_fd;
  }
  auto ucx = std::make_unique<UcxTransport>(m);
  m.sleeper = ucx.get();
  m.ucx_transport = std::move(ucx);
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
    const auto cb = t == door::kClaimMessage ? &Impl::on_door : request ? &Impl::on_request : greeting ? &Impl::on_peer_reply : &Impl::on_stray;
    if (auto st = handle(uint16_t(t), cb); st != UCS_OK)
      return net::ucx_error("UCX handler for message type " + std::to_string(t), st);
  }
  if (!options.ucx_listener) {
    auto t = auth::random_nonce();
    XC_TRY(t);
    std::copy_n(t->begin(), m.probe_ticket.size(), m.probe_ticket.begin());
  }
  // Aimed at the listener once there is one (at this worker's address without one). A worker
  // with neither a listener nor a door (another user's: its UCX is `self` only) serves nobody
  // over UCX, and the probe's own UCX could not reach it either.
  if (options.ucx_listener || options.door_fd >= 0) {
    SelfProbe::Options po;
    po.loopback_only = !options.trusted_network;
    po.shm = !options.ucx_listener;
    auto probe = SelfProbe::start(po);
    XC_TRY(probe);
    m.probe = std::move(*probe);
  }
  if (options.listen_at_start) XC_TRY(s->listen());
  install_fault_handlers();
  return s;
}

void UcxServer::Impl::init_parts() {
  const char* lanes = std::getenv("XCARGO_LANES");  // 0: peers' forwards through UCX only, as clients'
  Peers::LaneTo lane_to;
  if (!(lanes && std::string(lanes) == "0"))
    lane_to = [](const std::string& address) {
      auto a = net::parse_host_port(address);
      return a.ok() && net::on_this_host(*a);
    };
  admission = std::make_unique<Intake>(eps, *opt.gate, *this, log, largest_request(), largest());
  peers = std::make_unique<Peers>(opt.cluster, opt.gate->node_key(), link, log, std::move(lane_to),
                                  [gate = opt.gate](const RawKey& key) { return gate->is_peer_key(key); });
  for (unsigned i = 0; i < opt.executors; ++i) slots.push_back(std::make_unique<Slot>());
  monitor = std::make_unique<Monitor>(slots, opt.promote_after, std::chrono::nanoseconds(int64_t(opt.timeout_s * 1e9)),
                                      Monitor::Hooks{[this](Slot& s) { depose(s); }, [this](Slot& s) { time_out(s); }, [this] {
                                                       end_lanes_at_forced_end();
                                                       handler->flush_runs(true);
                                                       flush_log();  // the restart did not complete: force it
                                                       _exit(exit_code::kKernelFailure);
                                                     }}, request_limit());
  handler->on_load([this](bool loading) { this->loading(loading); });
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
