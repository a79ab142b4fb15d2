// ShmProbe: a hello to the worker's own listener every few seconds, over shared memory.
#include "shm_probe.h"

#include <algorithm>
#include <thread>

#include "xcargo/auth.h"

namespace xcargo::loader {

using namespace wire;
using Clock = std::chrono::steady_clock;

bool ShmProbe::needed(const std::vector<std::string>& transports) {
  return std::any_of(transports.begin(), transports.end(), [](const std::string& t) { return t == "posix" || t == "sysv"; });
}

Result<std::unique_ptr<ShmProbe>> ShmProbe::start(const Options& options) {
  std::unique_ptr<ShmProbe> p(new ShmProbe());
  p->opt_ = options;
  auto w = net::UcxWorker::create();
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
    static_cast<ShmProbe*>(arg)->answered_ = true;
    return UCS_OK;
  };
  if (ucs_status_t s = UCX->ucp_worker_set_am_recv_handler(p->w_->worker(), &hp); s != UCS_OK) return net::ucx_error("probe handler", s);
  if (!options.address.empty()) {
    p->aim(options.address);
    p->opt_.address = p->aimed_;
    if (!p->connect()) return Error(Errc::io, "the shared-memory probe cannot connect to " + p->opt_.address);
  }
  return p;
}

void ShmProbe::aim(const std::string& address) {
  {
    std::lock_guard<std::mutex> l(aim_mu_);
    aimed_ = address;
    if (const size_t colon = address.rfind(':'); colon != std::string::npos && address.compare(0, colon, "0.0.0.0") == 0)
      aimed_ = "127.0.0.1" + address.substr(colon);
  }
  have_address_ = true;
  if (w_) w_->wake();
}

ShmProbe::~ShmProbe() { close(); }

void ShmProbe::close() {
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

bool ShmProbe::connect() {
  close();
  lost_ = false;
  auto ep = net::connect_ep(w_->worker(), opt_.address, [](void* arg, ucp_ep_h, ucs_status_t) { static_cast<ShmProbe*>(arg)->lost_ = true; },
                            this);
  if (!ep.ok()) return false;
  ep_ = *ep;
  return true;
}

// One hello and its answer. False (with why) only when the answer did not come within the
// deadline although the server progressed: a connection lost or not yet made is no verdict.
bool ShmProbe::greet_once(const std::atomic<bool>& quit, const std::atomic<uint64_t>& progress, std::string* why) {
  answered_ = false;
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  p.flags = UCP_AM_SEND_FLAG_REPLY;
  ucs_status_ptr_t r = UCX->ucp_am_send_nbx(ep_, unsigned(MsgType::hello), hello_.data(), hello_.size(), nullptr, 0, &p);
  if (UCS_PTR_IS_ERR(r)) return true;
  auto deadline = Clock::now() + opt_.deadline;
  uint64_t progress0 = progress.load(std::memory_order_relaxed);
  bool ok = true;
  while (!quit && !lost_) {
    w_->progress_or_wait(50);  // the answer is read before the deadline is judged
    if (answered_) break;
    if (Clock::now() < deadline) continue;
    if (progress.load(std::memory_order_relaxed) - progress0 < opt_.min_progress) {  // nobody was reading: wait on
      deadline = Clock::now() + opt_.deadline;
      progress0 = progress.load(std::memory_order_relaxed);
      continue;
    }
    *why = "a hello over shared memory went unanswered for " + std::to_string(opt_.deadline.count() / 1000) +
           " s while the worker kept polling: its shared-memory receive queue is wedged (a local peer died in the "
           "middle of a send)";
    ok = false;
    break;
  }
  if (UCS_PTR_IS_PTR(r)) UCX->ucp_request_free(r);  // UCX completes (or, with the connection, fails) it on its own
  return ok;
}

void ShmProbe::run(const std::atomic<bool>& quit, const std::atomic<uint64_t>& progress,
                   const std::function<void(const std::string&)>& on_wedged) {
  while (!quit) {
    if (opt_.address.empty() && have_address_) {
      std::lock_guard<std::mutex> l(aim_mu_);
      opt_.address = aimed_;
      lost_ = true;  // connect now
    }
    if (opt_.address.empty()) {  // not aimed yet: wait for aim()
    } else if (lost_ && !connect()) {  // the server closed it (it never should): try again later
    } else if (std::string why; ep_ && !greet_once(quit, progress, &why)) {
      on_wedged(why);
      return;
    }
    for (auto until = Clock::now() + opt_.interval; !quit && Clock::now() < until;)  // wake() cuts it short
      w_->progress_or_wait(int(std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count()) + 1);
  }
}

}  // namespace xcargo::loader
