// UcxServer: listener and endpoint management, request intake, reply sending.
#include "ucx_server.h"

#include <deque>
#include <set>

#include "net/ucx.h"

namespace xcargo::loader {

using namespace wire;

namespace {

// A request copied out of the AM callback (or still arriving by rendezvous).
struct Job {
  ucp_ep_h ep = nullptr;
  MsgType type{};
  Bytes header, data;
  bool ready = false;  // data complete
  bool failed = false;
};

// A reply in flight: its bytes must live until UCX says the send completed.
struct Sending {
  Bytes header, data;
};

}  // namespace

struct UcxServer::Impl {
  Handler* handler = nullptr;
  Log log;
  std::unique_ptr<net::UcxWorker> w;
  ucp_listener_h listener = nullptr;
  std::string address;
  std::set<ucp_ep_h> eps;
  std::deque<std::shared_ptr<Job>> jobs;
  uint16_t ids[kMaxMsgType + 1] = {};
  struct HandlerArg {
    Impl* self;
    uint16_t type;
  } args[kMaxMsgType + 1] = {};

  static void on_conn(ucp_conn_request_h req, void* arg) {
    auto* self = static_cast<Impl*>(arg);
    ucp_conn_request_attr_t attr{};
    attr.field_mask = UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ADDR;
    std::string who = "?";
    if (ucp_conn_request_query(req, &attr) == UCS_OK) who = net::to_host_port(reinterpret_cast<sockaddr*>(&attr.client_address));
    ucp_ep_params_t p{};
    p.field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST | UCP_EP_PARAM_FIELD_ERR_HANDLER | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
    p.conn_request = req;
    p.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    p.err_handler.cb = &Impl::on_ep_error;
    p.err_handler.arg = self;
    ucp_ep_h ep = nullptr;
    if (ucs_status_t s = ucp_ep_create(self->w->worker(), &p, &ep); s != UCS_OK) {
      self->log("refused connection from " + who + ": " + ucs_status_string(s));
      return;
    }
    self->eps.insert(ep);
  }

  static void on_ep_error(void* arg, ucp_ep_h ep, ucs_status_t status) {
    auto* self = static_cast<Impl*>(arg);
    if (!self->eps.erase(ep)) return;
    for (auto& j : self->jobs)
      if (j->ep == ep) j->failed = true;
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    p.flags = UCP_EP_CLOSE_FLAG_FORCE;
    ucs_status_ptr_t r = ucp_ep_close_nbx(ep, &p);
    if (r && !UCS_PTR_IS_ERR(r)) ucp_request_free(r);
    (void)status;  // a client going away is normal
  }

  // Completion callbacks release their request: a request freed earlier gets no callback.
  static void on_data(void* request, ucs_status_t status, size_t, void* user) {
    auto* job = static_cast<Job*>(user);
    if (status != UCS_OK) job->failed = true;
    job->ready = true;
    ucp_request_free(request);
  }

  static ucs_status_t on_request(void* arg, const void* header, size_t header_length, void* data, size_t length,
                                 const ucp_am_recv_param_t* param) {
    auto* ha = static_cast<HandlerArg*>(arg);
    Impl* self = ha->self;
    if (!(param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) || !param->reply_ep) {
      self->log("refused request without a reply endpoint");
      return UCS_OK;
    }
    auto job = std::make_shared<Job>();
    job->ep = param->reply_ep;
    job->type = MsgType(ha->type);
    const uint64_t limit = std::max(self->handler->max_cargo(), self->handler->max_input());
    if (header_length > kMaxHeader || length > limit) {
      // Too large to accept: the handler still answers (limit/bad_request) from the header,
      // and the data is never fetched.
      job->header.assign(static_cast<const uint8_t*>(header), static_cast<const uint8_t*>(header) + std::min(header_length, kMaxHeader));
      job->ready = true;
      job->data.clear();
      job->failed = header_length > kMaxHeader;
      self->jobs.push_back(job);
      return UCS_OK;
    }
    const auto* h = static_cast<const uint8_t*>(header);
    job->header.assign(h, h + header_length);
    if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) {
      job->data.resize(length);
      ucp_request_param_t p{};
      p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
      p.cb.recv_am = &Impl::on_data;
      p.user_data = job.get();
      ucs_status_ptr_t r = ucp_am_recv_data_nbx(self->w->worker(), data, job->data.data(), length, &p);
      if (UCS_PTR_IS_ERR(r)) job->failed = job->ready = true;
      else if (r == nullptr) job->ready = true;  // else on_data completes it
    } else {
      const auto* d = static_cast<const uint8_t*>(data);
      job->data.assign(d, d + length);
      job->ready = true;
    }
    self->jobs.push_back(job);
    return UCS_OK;
  }

  static void on_sent(void* request, ucs_status_t, void* user) {
    delete static_cast<Sending*>(user);
    ucp_request_free(request);
  }

  void send(ucp_ep_h ep, Reply&& r) {
    if (!eps.count(ep)) return;  // the client went away
    auto* s = new Sending{std::move(r.header), std::move(r.data)};
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p.cb.send = &Impl::on_sent;
    p.user_data = s;
    ucs_status_ptr_t req = ucp_am_send_nbx(ep, unsigned(r.type), s->header.data(), s->header.size(), s->data.data(),
                                           s->data.size(), &p);
    if (req == nullptr || UCS_PTR_IS_ERR(req)) delete s;  // completed at once, or failed: no callback will come
  }

  // Handles every request whose data has arrived, in arrival order.
  bool drain() {
    bool did = false;
    while (!jobs.empty() && jobs.front()->ready) {
      std::shared_ptr<Job> j = jobs.front();
      jobs.pop_front();
      did = true;
      if (j->failed) continue;
      Reply r = handler->handle(j->type, j->header, j->data);
      send(j->ep, std::move(r));
    }
    return did;
  }
};

UcxServer::UcxServer() : impl_(std::make_unique<Impl>()) {}

UcxServer::~UcxServer() {
  if (!impl_->w) return;
  for (ucp_ep_h ep : impl_->eps) {
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    p.flags = UCP_EP_CLOSE_FLAG_FORCE;
    ucs_status_ptr_t r = ucp_ep_close_nbx(ep, &p);
    if (r && !UCS_PTR_IS_ERR(r)) ucp_request_free(r);
  }
  impl_->eps.clear();
  if (impl_->listener) ucp_listener_destroy(impl_->listener);
  for (int i = 0; i < 100; ++i) ucp_worker_progress(impl_->w->worker());
}

std::string UcxServer::address() const { return impl_->address; }

Result<std::unique_ptr<UcxServer>> UcxServer::start(const std::string& listen, Handler& handler, Log log) {
  std::unique_ptr<UcxServer> s(new UcxServer());
  Impl& m = *s->impl_;
  m.handler = &handler;
  m.log = std::move(log);
  socklen_t len = 0;
  auto addr = net::parse_host_port(listen, &len);
  XC_TRY(addr);
  auto w = net::UcxWorker::create(false);
  XC_TRY(w);
  m.w = std::move(*w);
  for (uint16_t t = 1; t < kMaxMsgType; t += 2) {  // every request type
    m.args[t] = {&m, t};
    ucp_am_handler_param_t hp{};
    hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG |
                    UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
    hp.id = t;
    hp.cb = &Impl::on_request;
    hp.arg = &m.args[t];
    hp.flags = UCP_AM_FLAG_WHOLE_MSG;
    if (auto st = ucp_worker_set_am_recv_handler(m.w->worker(), &hp); st != UCS_OK) return net::ucx_error("UCX handler", st);
  }
  ucp_listener_params_t lp{};
  lp.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
  lp.sockaddr.addr = reinterpret_cast<const sockaddr*>(&*addr);
  lp.sockaddr.addrlen = len;
  lp.conn_handler.cb = &Impl::on_conn;
  lp.conn_handler.arg = &m;
  if (auto st = ucp_listener_create(m.w->worker(), &lp, &m.listener); st != UCS_OK)
    return Error(Errc::io, "cannot listen on " + listen + ": " + ucs_status_string(st))
        .hint("is another loader using that port? port 0 picks a free one");
  ucp_listener_attr_t attr{};
  attr.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
  if (ucp_listener_query(m.listener, &attr) == UCS_OK) m.address = net::to_host_port(reinterpret_cast<sockaddr*>(&attr.sockaddr));
  else m.address = listen;
  return s;
}

void UcxServer::run(const std::atomic<bool>& stop) {
  Impl& m = *impl_;
  while (!stop.load(std::memory_order_relaxed)) {
    bool busy = false;
    while (ucp_worker_progress(m.w->worker()) != 0) busy = true;
    busy |= m.drain();
    if (busy) continue;
    m.w->progress_or_wait(200);  // idle: sleep in epoll, wake for events or to check stop
    m.drain();
  }
}

}  // namespace xcargo::loader
