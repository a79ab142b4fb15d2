// RawClient: one raw UCX connection to a loader for the attack tools.
#include "raw_client.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include <poll.h>
#include <unistd.h>

#include "tool_args.h"
#include "auth/auth.h"
#include "net/door.h"

namespace xcargo::test {

using namespace wire;
using Clock = std::chrono::steady_clock;

RawClient::RawClient(const char* tool, const std::string& to, bool rma, const door::Route& route) : tool_(tool) {
  auto w = net::UcxWorker::create(false, rma);
  if (!w.ok()) die(tool_, w.error().message(), 2);
  w_ = std::move(*w);
  for (uint16_t t = 2; t <= kMaxMsgType; t += 2) {  // every answer type
    ucp_am_handler_param_t hp{};
    hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG;
    hp.id = t;
    hp.arg = this;
    hp.cb = [](void* arg, const void* header, size_t len, void*, size_t, const ucp_am_recv_param_t*) -> ucs_status_t {
      auto* c = static_cast<RawClient*>(arg);
      const auto* h = static_cast<const uint8_t*>(header);
      c->answer_.assign(h, h + len);
      c->have_ = true;
      return UCS_OK;
    };
    ucp_worker_set_am_recv_handler(w_->worker(), &hp);
  }
  const ucp_err_handler_cb_t on_error = [](void* arg, ucp_ep_h, ucs_status_t) { static_cast<RawClient*>(arg)->lost_ = true; };
  // A loader of this user on this host serves through its same-host door (its UCX has no
  // listener unless it has trusted-network), as the client library does.
  if (door_route(to))
    if (auto fd = door::connect(to, route); fd.ok()) {
      auto offer = door::read_offer(*fd, to, std::chrono::seconds(30));  // a ceiling: a worker restarting on a busy machine
      if (!offer.ok()) die(tool_, offer.error().message(), 2);
      lifeline_ = offer->fd;
      ticket_ = offer->ticket;
      auto ep = net::connect_address(w_->worker(), offer->address, on_error, this);
      if (!ep.ok()) die(tool_, ep.error().message(), 2);
      ep_ = *ep;
      send(door::kClaimMessage, Bytes(ticket_.begin(), ticket_.end()), true);
      return;
    }
  auto ep = net::connect_ep(w_->worker(), to, on_error, this);
  if (!ep.ok()) die(tool_, ep.error().message(), 2);
  ep_ = *ep;
}

RawClient::~RawClient() {
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  p.flags = UCP_EP_CLOSE_FLAG_FORCE;
  ucs_status_ptr_t r = ucp_ep_close_nbx(ep_, &p);
  if (UCS_PTR_IS_PTR(r)) {
    const auto deadline = Clock::now() + std::chrono::seconds(2);
    while (ucp_request_check_status(r) == UCS_INPROGRESS && Clock::now() < deadline) ucp_worker_progress(w_->worker());
    if (ucp_request_check_status(r) != UCS_INPROGRESS) ucp_request_free(r);
  }
  if (lifeline_ >= 0) ::close(lifeline_);
}

bool RawClient::door_route(const std::string& to) {
  auto a = net::parse_host_port(to, nullptr);
  return a.ok() && net::door_route(*a);
}

bool RawClient::lost() const {
  if (lost_ || lifeline_ < 0) return lost_;
  pollfd p{lifeline_, POLLIN | POLLRDHUP, 0};
  return ::poll(&p, 1, 0) == 1;  // the loader sends nothing on it: readable is its end
}

bool RawClient::ask(MsgType type, const Bytes& header, ByteView data, int seconds) {
  have_ = false;
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  p.flags = UCP_AM_SEND_FLAG_REPLY;
  const Bytes h = sealed(header);
  ucs_status_ptr_t r = ucp_am_send_nbx(ep_, unsigned(type), h.data(), h.size(), data.data(), data.size(), &p);
  const auto deadline = Clock::now() + std::chrono::seconds(seconds);
  while (!have_ && !lost_ && Clock::now() < deadline) ucp_worker_progress(w_->worker());
  if (UCS_PTR_IS_PTR(r)) {
    while (ucp_request_check_status(r) == UCS_INPROGRESS && !lost_ && Clock::now() < deadline) ucp_worker_progress(w_->worker());
    if (ucp_request_check_status(r) != UCS_INPROGRESS) ucp_request_free(r);
  }
  return have_;
}

Bytes RawClient::sealed(const Bytes& header) const {
  Bytes h = header;
  if (token_) h.insert(h.end(), token_->begin(), token_->end());
  return h;
}

bool RawClient::wait_answer(int seconds) {
  const auto deadline = Clock::now() + std::chrono::seconds(seconds);
  while (!have_ && !lost_ && Clock::now() < deadline) ucp_worker_progress(w_->worker());
  return have_;
}

void RawClient::send(uint16_t type, const Bytes& header, bool reply_flag) {
  have_ = false;
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  p.flags = reply_flag ? UCP_AM_SEND_FLAG_REPLY : 0;
  ucs_status_ptr_t r = ucp_am_send_nbx(ep_, type, header.data(), header.size(), nullptr, 0, &p);
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  if (UCS_PTR_IS_PTR(r)) {
    while (ucp_request_check_status(r) == UCS_INPROGRESS && !lost_ && Clock::now() < deadline) ucp_worker_progress(w_->worker());
    if (ucp_request_check_status(r) != UCS_INPROGRESS) ucp_request_free(r);
  }
}

void RawClient::send_blind(uint16_t type, const Bytes& header) {
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  p.flags = UCP_AM_SEND_FLAG_REPLY;
  ucs_status_ptr_t r = ucp_am_send_nbx(ep_, type, header.data(), header.size(), nullptr, 0, &p);
  if (UCS_PTR_IS_PTR(r)) ucp_request_free(r);  // UCX sends it whenever this worker progresses next
}

void RawClient::greet(uint16_t max_version, const Bytes& reply_address) {
  auto n = auth::random_nonce();
  if (!n.ok()) die(tool_, n.error().message(), 2);
  nonce_ = *n;
  auto address = w_->address();
  if (!address.ok()) die(tool_, address.error().message(), 2);
  if (!ask(MsgType::hello, encode(Hello{std::min<uint16_t>(1, max_version), max_version, reply_address.empty() ? *address : reply_address, nonce_})))
    die(tool_, "no hello_reply", 2);
  auto h = decode_hello_reply(answer_);
  if (!h.ok()) die(tool_, h.error().message(), 2);
  hello_ = *h;
}

Auth RawClient::proof(const SigningKey& key) const {
  auto sig = key.sign(auth::client_proof(nonce_, hello_.nonce, hello_.node_key, key.public_key().raw));
  if (!sig.ok()) die(tool_, sig.error().message(), 2);
  return Auth{1, key.public_key().raw, *sig};
}

std::string RawClient::prove(const Auth& a, int seconds) {
  if (!ask(MsgType::auth, encode(a), {}, seconds)) return lost_ ? "connection closed" : "no answer";
  auto r = decode_auth_reply(answer_);
  if (!r.ok()) return "undecodable: " + r.error().message();
  if (r->status == ReplyStatus::ok) token_ = r->token;
  return std::string(status_name(r->status)) + (r->message.empty() ? "" : ": " + r->message);
}

}  // namespace xcargo::test
