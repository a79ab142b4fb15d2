// SelfProbe: a new connection to the worker (its listener, or its address) every few seconds, and a hello.
#include "server/self_probe.h"

#include <algorithm>
#include <thread>

#include "auth/auth.h"

namespace xcargo::loader {

using namespace wire;
using Clock = std::chrono::steady_clock;

Result<std::unique_ptr<SelfProbe>> SelfProbe::start(const Options& options) {
  std::unique_ptr<SelfProbe> p(new SelfProbe());
  p->opt_ = options;
  p->opt_.address.clear();
  auto w = net::UcxWorker::create(false, false, options.loopback_only, options.shm);
  XC_TRY(w);
  p->w_ = std::move(*w);
  auto nonce = auth::random_nonce();
  XC_TRY(nonce);
  p->nonce_ = *nonce;
  auto address = p->w_->address();
  XC_TRY(address);
  p->hello_ = encode(Hello{kVersion, kVersion, *address, p->nonce_});
  ucp_am_handler_param_t hp{};
  hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG;
  hp.id = uint16_t(MsgType::hello_reply);
  hp.arg = p.get();
  hp.cb = [](void* arg, const void*, size_t, void*, size_t, const ucp_am_recv_param_t*) -> ucs_status_t {
    static_cast<SelfProbe*>(arg)->answered_ = true;
    return UCS_OK;
  };
  if (ucs_status_t s = UCX->ucp_worker_set_am_recv_handler(p->w_->worker(), &hp); s != UCS_OK) return net::ucx_error("probe handler", s);
  if (!options.address.empty()) p->aim(options.address);
  return p;
}

void SelfProbe::aim(const std::string& address) {
  {
    std::lock_guard<std::mutex> l(aim_mu_);
    aimed_ = address;
    if (const size_t colon = address.rfind(':'); colon != std::string::npos && address.compare(0, colon, "0.0.0.0") == 0)
      aimed_ = "127.0.0.1" + address.substr(colon);
  }
  have_address_ = true;
  if (w_) w_->wake();
}

void SelfProbe::aim_at_worker(ByteView worker_address, const door::Ticket& ticket) {
  {
    std::lock_guard<std::mutex> l(aim_mu_);
    worker_address_.assign(worker_address.begin(), worker_address.end());
    ticket_ = ticket;
    aimed_ = "this worker's address";
  }
  have_address_ = true;
  if (w_) w_->wake();
}

SelfProbe::~SelfProbe() { close(); }

void SelfProbe::close() {
  if (!ep_) return;
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  p.flags = UCP_EP_CLOSE_FLAG_FORCE;
  ucs_status_ptr_t r = UCX->ucp_ep_close_nbx(ep_, &p);
  if (UCS_PTR_IS_PTR(r)) {
    for (int i = 0; i < 1000 && UCX->ucp_request_check_status(r) == UCS_INPROGRESS; ++i) UCX->ucp_worker_progress(w_->worker());
    if (UCX->ucp_request_check_status(r) != UCS_INPROGRESS) UCX->ucp_request_free(r);
  }
  ep_ = nullptr;
}

bool SelfProbe::connect() {
  close();
  lost_ = false;
  const ucp_err_handler_cb_t on_error = [](void* arg, ucp_ep_h, ucs_status_t) { static_cast<SelfProbe*>(arg)->lost_ = true; };
  if (worker_address_.empty()) {
    auto ep = net::connect_ep(w_->worker(), opt_.address, on_error, this);
    if (!ep.ok()) return false;
    ep_ = *ep;
    return true;
  }
  auto ep = net::connect_address(w_->worker(), worker_address_, on_error, this);
  if (!ep.ok()) return false;
  ep_ = *ep;
  if (!net::send_claim(ep_, ticket_).ok()) return close(), false;
  return true;
}

bool SelfProbe::greet_once(const std::atomic<bool>& quit) {
  // By address, one connection serves every probe: UCX on the worker's side makes an
  // endpoint of its own for it, which it may free once this side's is gone (the worker,
  // not told, would then take the next connection at that address for the probe's).
  // A wedged receive queue stops its hellos as it would a new connection's.
  const bool keep = !worker_address_.empty();
  if (!(keep && ep_ && !lost_) && !connect()) return false;
  answered_ = false;
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  p.flags = UCP_AM_SEND_FLAG_REPLY;
  ucs_status_ptr_t r = UCX->ucp_am_send_nbx(ep_, unsigned(MsgType::hello), hello_.data(), hello_.size(), nullptr, 0, &p);
  if (UCS_PTR_IS_ERR(r)) {
    close();
    return false;
  }
  const auto until = Clock::now() + opt_.interval;
  while (!quit && !lost_ && !answered_ && Clock::now() < until) w_->progress_or_wait(50);
  if (UCS_PTR_IS_PTR(r)) {
    if (UCX->ucp_request_check_status(r) == UCS_INPROGRESS) UCX->ucp_request_cancel(w_->worker(), r);
    UCX->ucp_request_free(r);
  }
  const bool ok = answered_;
  if (!keep || lost_) close();
  return ok;
}

void SelfProbe::run(const std::atomic<bool>& quit, const std::atomic<uint64_t>& progress,
                    const std::function<void(const std::string&)>& on_wedged) {
  auto last_ok = Clock::now();
  uint64_t progress_at_ok = progress.load(std::memory_order_relaxed);
  while (!quit) {
    if (opt_.address.empty() && have_address_) {
      std::lock_guard<std::mutex> l(aim_mu_);
      opt_.address = aimed_;
      last_ok = Clock::now();  // listening from now on
      progress_at_ok = progress.load(std::memory_order_relaxed);
    }
    const auto started = Clock::now();
    if (!opt_.address.empty()) {
      if (greet_once(quit)) {
        last_ok = Clock::now();
        progress_at_ok = progress.load(std::memory_order_relaxed);
      } else if (Clock::now() - last_ok >= opt_.deadline) {
        if (progress.load(std::memory_order_relaxed) - progress_at_ok >= opt_.min_progress) {
          on_wedged("for " + std::to_string(opt_.deadline.count() / 1000) +
                    " s no new connection to the worker was answered while the worker kept polling: new "
                    "clients cannot reach it (its listening sockets closed, or its shared-memory receive queue wedged)");
          return;
        }
        last_ok = Clock::now();  // nobody was reading: no verdict, wait on
        progress_at_ok = progress.load(std::memory_order_relaxed);
      }
    }
    bool aimed_now = false;
    for (auto until = started + opt_.interval; !quit && Clock::now() < until;) {  // wake() cuts it short
      if (!aimed_now && opt_.address.empty() && have_address_) {  // aim() woke it
        aimed_now = true;
        until = std::min(until, Clock::now() + opt_.first_after);
      }
      w_->progress_or_wait(int(std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count()) + 1);
    }
  }
}

}  // namespace xcargo::loader
