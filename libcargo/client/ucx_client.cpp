// connect(): the client transport over UCX Active Messages (format-spec/wire-protocol.md 2.1).
#include <algorithm>
#include <array>
#include <chrono>
#include <deque>
#include <list>
#include <map>
#include <vector>
#include <cstdlib>
#include <cstring>
#include <sched.h>
#include <optional>
#include <thread>

#include <netinet/in.h>
#include <poll.h>
#include <unistd.h>

#include "client/connect_time.h"
#include "client/session.h"
#include "client/tls_client.h"
#include "net/ucx.h"
#include "auth/auth.h"
#include "xcargo/cluster.h"
#include "xcargo/client.h"
#include "net/door.h"
#include "wire/lane.h"
#include "common/large_buffers.h"

namespace xcargo::client {

// One try's share of the time to connect: a handshake that the worker it reached never
// answers (one ending after a kernel's failure stops reading) is given up and tried again
// on a new connection, which reaches the worker that took over.
constexpr std::chrono::milliseconds kTryLimit(5000);

// What a connection says first at a loader's same-host door: the key it will prove (zeros
// without an identity, for a loader that serves anyone).
door::Route route_at_door(const ConnectOptions& o) {
  door::Route r;
  if (o.identity_key) r.key = o.identity_key->public_key().raw;
  return r;
}

using namespace wire;
using Clock = std::chrono::steady_clock;

namespace {

class UcxConnection final : public Session {
public:
  ~UcxConnection() override {
    close();
    if (door_first_ >= 0) ::close(door_first_);  // open() failed after it
  }
  std::string peer() const override { return peer_; }
  bool can_get_one_sided() const override { return one_sided_; }
  // Bounds were checked by Connection::get against the length the node announced.
  Status get_one_sided(const RemoteRegion& region, uint64_t offset, void* out, size_t len) override {
    if (failed_) return lost();
    auto it = rkeys_.find(region.address);
    if (it == rkeys_.end()) {
      ucp_rkey_h rkey = nullptr;
      if (ucs_status_t s = UCX->ucp_ep_rkey_unpack(ep_, region.rkey.data(), &rkey); s != UCS_OK)
        return net::ucx_error(peer_ + ": region '" + region.name + "': its remote key", s);
      it = rkeys_.emplace(region.address, rkey).first;
    }
    ucp_request_param_t p{};
    ucs_status_ptr_t req = UCX->ucp_get_nbx(ep_, out, len, region.address + offset, it->second, &p);
    if (UCS_PTR_IS_ERR(req)) return net::ucx_error(peer_ + ": get", UCS_PTR_STATUS(req));
    if (req == nullptr) return {};
    ucs_status_t s;
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms_);
    int polls = 0;
    while ((s = UCX->ucp_request_check_status(req)) == UCS_INPROGRESS) {
      UCX->ucp_worker_progress(w_->worker());
      if (++polls % 1024 == 0 && Clock::now() > deadline) {
        UCX->ucp_request_cancel(w_->worker(), req);
        while (UCX->ucp_request_check_status(req) == UCS_INPROGRESS) UCX->ucp_worker_progress(w_->worker());
        UCX->ucp_request_free(req);
        unanswered_ = true;
        return Error(Errc::unreachable, peer_ + ": get: no answer within " + std::to_string(timeout_ms_ / 1000) + " s");
      }
    }
    UCX->ucp_request_free(req);
    if (s != UCS_OK) return net::ucx_error(peer_ + ": get", s);
    return {};
  }

  Bytes reply_address() const override {
    auto a = w_->address();
    return a.ok() ? std::move(*a) : Bytes();
  }

  // Connects and performs the handshake within timeout_ms; on failure, *how says why
  // (refused: no door, or a UCX listener's port refused).
  Status open(const std::string& host_port, const ConnectOptions& o, bool listener_allowed, int timeout_ms, TryFailure* how) {
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    peer_ = host_port.find(':') == std::string::npos ? host_port + ":" + std::to_string(net::kDefaultPort) : host_port;
    auto addr = net::parse_host_port(host_port, nullptr);
    if (!addr.ok()) return addr.take_error();
    one_sided_ = o.one_sided;
    // UCX writes its own errors to stdout (a refused connect while a node restarts), where
    // they would mix with a program's output; this library reports failures itself. A user
    // who wants UCX's lines sets UCX_LOG_LEVEL.
    net::default_ucx_log_level("fatal");
    // To a node on this host, UCX's own ports stay on loopback: no other host reaches this
    // process through them (UCX trusts every peer that does). Shared memory only through the
    // same-host door, whose loader is of this user: through the listener the worker may be
    // another user's, which could not attach this process's segments (nor it the worker's).
    const bool local = net::is_loopback(*addr);
    local_ = local;
    // The door is named by the address as the loader bound it (localhost:7400 is 127.0.0.1:7400).
    door_at_ = net::to_host_port(reinterpret_cast<const sockaddr*>(&*addr));
    if (net::door_route(*addr)) {
      auto fd = door::connect(door_at_, route_at_door(o), &how->refused);
      if (fd.ok()) door_first_ = *fd;
      // Another user's process holds this loader's name: nothing at the address can be
      // trusted to be the loader (UCX would not check its key), so no listener is tried.
      else if (fd.error().code() == Errc::unauthenticated) return fd.take_error();
      // No door: no loader serves the address (it may be restarting), or a process of any
      // user listens there; UCX's listener only when the address said ucx:// on purpose.
      else if (!listener_allowed) {
        how->refused_for_good = how->refused;  // a loader's supervisor holds its door across worker restarts
        return Error(fd.error()).hint("ucx://" + peer_ + " reaches a loader's UCX listener (trusted-network), where no key proves who answers");
      }
    }
    via_door_ = door_first_ >= 0;
    auto w = net::UcxWorker::create(false, one_sided_, local, via_door_);
    XC_TRY(w);
    w_ = std::move(*w);
    // Every id up to the highest gets a handler, replies or a drop: UCX 1.13 jumps through
    // the uninitialized slots of unregistered ids below the highest registered one.
    for (uint16_t t = 0; t <= kMaxMsgType; ++t) {
      slots_[t] = {this, t};
      ucp_am_handler_param_t hp{};
      hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG |
                      UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
      hp.id = t;
      hp.cb = t > 0 && t % 2 == 0 ? &UcxConnection::on_reply
                                  : [](void*, const void*, size_t, void*, size_t, const ucp_am_recv_param_t*) -> ucs_status_t {
                                      return UCS_OK;  // not a reply: dropped
                                    };
      hp.arg = &slots_[t];
      hp.flags = UCP_AM_FLAG_WHOLE_MSG;
      if (auto s = UCX->ucp_worker_set_am_recv_handler(w_->worker(), &hp); s != UCS_OK) return net::ucx_error("UCX handler", s);
    }
    o_ = o;
    auto s = attach(deadline);
    if (!s.ok()) {
      how->refused = refused_by_listener();
      how->timed_out = unanswered_ && !failed_;  // the handshake's time ran out
    }
    return s;
  }

protected:
  bool wants_lane() const override {
    if (!o_.lane) return false;
    if (const char* v = std::getenv("XCARGO_LANES"); v && std::string(v) == "0") return false;
    auto a = net::parse_host_port(peer_, nullptr);
    return a.ok() && net::on_this_host(*a);
  }
  void take_lane(const LaneOffer& offer) override {
    lane::Segment seg = lane::attach(offer.shm_id, offer.nonce);
    if (!seg) return;  // another host after all, or another uid: UCX only
    lane_ = seg;
    kick_ = sealed(ByteView());
  }

  // The node went away between requests (a worker replaced after a kernel failed): the next
  // request, not yet sent, goes to a new connection.
  bool lost_before_sending() const override { return failed_ && !closed_ && handshaken(); }
  Status reconnect() override {
    const auto give_up = Clock::now() + std::chrono::milliseconds(o_.retry_ms);
    // A standby worker takes over within milliseconds, a newly started one within a few
    // hundred: try again soon at first, then every 20 ms.
    for (int tries = 0;; ++tries) {
      unanswered_ = true;  // the old worker is ending: no graceful close
      drop();
      auto s = attach(Clock::now() + std::min(kTryLimit, std::chrono::milliseconds(o_.connect_timeout_ms)));
      if (s.ok() || s.error().code() != Errc::unreachable || Clock::now() > give_up) return s;
      std::this_thread::sleep_for(std::chrono::milliseconds(std::min(1 << std::min(tries, 5), 20)));
    }
  }

private:
  // A new endpoint on this worker, and the handshake over it, by deadline.
  Status attach(Clock::time_point deadline) {
    failed_ = unanswered_ = false;
    fail_status_ = UCS_OK;
    awaited_.clear();  // a new connection: nothing of the old one's is answered here
    auto ep = open_endpoint(deadline);
    XC_TRY(ep);
    ep_ = *ep;
    attached_at_ = Clock::now();
    timeout_ms_ = ms_until(deadline);
    auto hs = handshake(o_.identity_key.get(), o_.identity.empty() ? auth::default_identity_path() : o_.identity);
    timeout_ms_ = o_.reply_timeout_ms;
    if (!hs.ok() && unanswered_ && !failed_)  // roundtrip's time ran out
      return Error(Errc::unreachable, peer_ + ": no answer within the connect timeout (" + duration_text(o_.connect_timeout_ms) + ")")
          .hint("the loader there may be stopped (SIGSTOP), overloaded, or not a loader");
    return hs;
  }

  // Through the loader's same-host door (wire-protocol.md 2.4) when open() found one of this
  // user's (then every reconnection too: this worker's endpoints may need shared memory);
  // else through its UCX listener.
  Result<ucp_ep_h> open_endpoint(Clock::time_point deadline) {
    if (via_door_) {
      int fd = std::exchange(door_first_, -1);
      if (fd < 0) {
        auto c = door::connect(door_at_, route_at_door(o_));
        XC_TRY(c);
        fd = *c;
      }
      {
        const auto limit = std::min(kDoorLimit, std::chrono::milliseconds(ms_until(deadline)));
        auto offer = door::read_offer(fd, door_at_, limit);  // closes fd if there is none
        XC_TRY(offer);
        auto ep = net::connect_address(w_->worker(), offer->address, &UcxConnection::on_error, this);
        if (!ep.ok()) {
          ::close(offer->fd);
          return ep.take_error();
        }
        lifeline_ = offer->fd;
        (void)w_->watch(lifeline_);  // its end wakes a sleeping wait
        ticket_ = offer->ticket;  // kept while the endpoint lives
        if (Status s = net::send_claim(*ep, ticket_); !s.ok()) return Error(Errc::unreachable, peer_ + ": " + s.error().message());
        return ep;
      }
    }
    return net::connect_ep(w_->worker(), peer_, &UcxConnection::on_error, this);
  }
  // The door's connection ended (the loader closed this session, or its worker ended): the
  // endpoint is lost, as when UCX reports it. What the worker sent before it ended is taken
  // first (its `restarting` and `interrupted` answers): the keeper closes its lifelines only
  // once it is gone.
  void check_lifeline() {
    if (lifeline_ < 0) return;
    pollfd p{lifeline_, POLLIN | POLLRDHUP, 0};
    if (::poll(&p, 1, 0) != 1) return;
    while (UCX->ucp_worker_progress(w_->worker()) != 0) {
    }
    close_lifeline();
    failed_ = true;
    if (fail_status_ == UCS_OK) fail_status_ = UCS_ERR_CONNECTION_RESET;
  }
  void close_lifeline() {
    if (lifeline_ < 0) return;
    w_->unwatch(lifeline_);
    ::close(lifeline_);
    lifeline_ = -1;
  }

public:

protected:
  Result<Frame> roundtrip(MsgType type, ByteView header, ByteView data) override {
    if (failed_) return lost();
    // The reply goes into buffers the last one's caller gave back (no allocation for a small one).
    reply_.type = {};
    reply_.header.clear();
    reply_.data.clear();
    if (reply_.header.capacity() == 0) reply_.header.swap(spare_header_);
    if (reply_.data.capacity() == 0) reply_.data.swap(spare_data_);
    reply_ready_ = false;
    // Every request but hello starts with its request id, which its reply repeats: a frame
    // with another id (a late reply, or a result someone had a node send to this client's
    // address) is dropped, not taken for this request's reply.
    expect_id_ = leading_request_id(type, header);
    send_done_ = false;
    bool via_lane = false;
    if (lane_send(type, header, data)) {
      send_done_ = via_lane = true;
    } else {
      ucp_request_param_t p{};
      p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
      p.flags = UCP_AM_SEND_FLAG_REPLY;
      p.cb.send = &UcxConnection::on_sent;
      p.user_data = this;
      ucs_status_ptr_t req = UCX->ucp_am_send_nbx(ep_, unsigned(type), header.data(), header.size(), data.data(), data.size(), &p);
      if (UCS_PTR_IS_ERR(req)) return Error(Errc::unreachable, peer_ + ": send failed: " + UCX->ucs_status_string(UCS_PTR_STATUS(req)));
      if (req == nullptr) send_done_ = true;
      else send_req_ = req;
    }
    Waiting wait(*this, wait_kind(type, header), via_lane ? lane_sent_ : 0);
    while (!(send_done_ && reply_ready_) && !(failed_ && !reply_ready_)) {
      if (lane_ && lane_poll()) continue;
      if (progress_due() && (ucx_busy_ = UCX->ucp_worker_progress(w_->worker()) != 0)) continue;
      if (!wait.idle()) {
        if (send_req_) UCX->ucp_request_cancel(w_->worker(), send_req_);  // on_sent still releases it
        unanswered_ = true;
        return Error(Errc::unreachable, peer_ + ": no reply within " + duration_text(timeout_ms_));
      }
    }
    wait.done();
    // A reply that arrived counts even if the node went away right after sending it (a
    // worker restarting after a kernel crash answers first, then exits); so does one it
    // wrote into the lane just before it ended.
    for (uint32_t k = 0; k < lane::kSlots && !reply_ready_ && lane_ && !lane_malformed_ && lane_poll(); ++k) {
    }
    if (reply_ready_) return std::move(reply_);
    return lost();
  }

private:
  struct Slot {
    UcxConnection* self;
    uint16_t type;
  };

  // A wait for a reply. Sleeping costs a wake-up when the reply comes (0.15 to 0.6 ms on a
  // VM: more than a millisecond-scale kernel can bear, bench-kernels), and polling costs a
  // core that the kernel may be sharing (a loader on the same host, 2 cores say). So: poll for
  // kFirstSpin when no wait of this kind was timed, kPushSpin for a push (kMinSpin when the
  // last one was quick); if the last wait of the same kind (wait_kind) slept and took W,
  // sleep until kWakeEarly before W, then poll until 2 W (at most ConnectOptions::max_spin_us
  // after the start); then sleep until the reply wakes this thread. A client calling the same
  // kernel again catches its reply polling, with its core free for most of the kernel's run;
  // a push or another kernel does not inherit the last one's wait (a push after a slow
  // authentication, then the first call after a slow push, each napped a millisecond or
  // more past their replies). The clock is read only after kQuietPolls empty polls: a quick
  // reply never needs it.
  static constexpr uint64_t kOther = 0, kPipelined = 1, kPush = 2;
  // Invocations of one entry with one input size share a kind; a push is never timed (its
  // time depends on the cargo); other requests have none.
  static uint64_t wait_kind(MsgType type, ByteView header) {
    if (type == MsgType::push) return kPush;
    if (type != MsgType::invoke || header.size() <= 8) return kOther;
    uint64_t h = 1469598103934665603ull;  // FNV-1a over all but the request id
    for (uint8_t b : header.subspan(8)) h = (h ^ b) * 1099511628211ull;
    return h > kPush ? h : h + 3;
  }
  class Waiting {
  public:
    // sent: for a request written into the lane, the count of requests written with it.
    Waiting(UcxConnection& c, uint64_t kind, uint64_t sent = 0) : c_(c), kind_(kind), sent_(sent) {
      untimed_ = kind_ == kOther || kind_ == kPush || kind_ != c_.last_kind_;
      if (untimed_) c_.last_wait_ = Clock::duration::zero();
    }
    // After an empty poll: false once the reply's time limit has passed.
    bool idle() {
      // Polling a lane takes a few nanoseconds, a clock read 25 to 70 (this VM): then the
      // clock is read every 16th time only.
      if (++quiet_ < kQuietPolls || (c_.lane_ && quiet_ % 16 != 0)) return true;
      const auto now = Clock::now();
      c_.send_cancel_if_due();
      if (quiet_ == kQuietPolls) {
        start_ = now;
        deadline_ = now + std::chrono::milliseconds(c_.timeout_ms_);
        const auto cap = std::chrono::microseconds(std::max(0, c_.o_.max_spin_us));
        const Clock::duration spin = kind_ == kPush ? Clock::duration(kPushSpin)
                                     : untimed_       ? Clock::duration(kFirstSpin)
                                                      : 2 * c_.last_wait_;
        spin_until_ = now + std::clamp<Clock::duration>(spin, kMinSpin, cap);
        nap_until_ = c_.last_wait_ > kWakeEarly && c_.last_wait_ < cap ? now + c_.last_wait_ - kWakeEarly : now;
      }
      if (now > deadline_) return false;
      if (now > start_ + kMinSpin && now < nap_until_) {  // before the reply is due: sleep, whole milliseconds
        const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(nap_until_ - now).count();
        if (ms >= 1) c_.sleep(int(ms));
        else nap_until_ = now;
      } else if (now > spin_until_) {
        // Long waits sleep instead of spinning; in short steps at first on a new connection:
        // UCX 1.13 does not always wake a sleeping worker for a reply that arrives on a
        // connection made a moment ago (the loader's kWaryAfterConnect): a first call over
        // tcp to a loader started a moment before slept its whole step (16 ms, not 1.4).
        c_.sleep(now - c_.attached_at_ < kWaryAfterConnect ? 1 : 10);
      } else if (sent_ && c_.lane_ && now - start_ >= kUntakenWait && c_.lane_.requests().taken_now() < sent_ &&
                 (!c_.lane_.worker_idle() || now - start_ >= kUntakenIdleWait)) {
        // The node has not taken the request from the lane although its leader polls (or
        // was kicked a while ago): it is not running, most likely because this thread took
        // its core (on 2 cores the node's leader, woken by the last reply, waited runnable
        // behind this spin for its whole 3 ms). Sleep: its reply kicks this thread awake.
        c_.sleep(1);
      } else if (now - start_ >= kYieldEvery && now - yielded_ >= kYieldEvery) {
        // Polling, while the node may be waiting for this core: on 2 cores a reply wakes
        // this thread onto the core of the node thread that sent it, which, still runnable
        // (it had more to do), waited behind this spin for its whole 3 ms (a first call
        // over tcp after a JIT push: 3 to 5 ms in half the runs). Alone on its core, a
        // yield returns at once.
        ::sched_yield();
        yielded_ = now;
      }
      return true;
    }
    void done() {
      c_.last_wait_ = quiet_ >= kQuietPolls ? Clock::now() - start_ : Clock::duration::zero();
      c_.last_kind_ = kind_;
    }

  private:
    static constexpr int kQuietPolls = 64;
    static constexpr std::chrono::microseconds kMinSpin{200};
    // A reply of a kind not timed yet (a first call, a request other than an invocation):
    // most take 0.5 to 2 ms, and waking from a sleep when it comes cost 0.2 to 0.6 ms.
    static constexpr std::chrono::microseconds kFirstSpin{3000};
    // A push: a native object's is answered in about 1 to 2 ms here, a JIT compile takes
    // several. Polling through the compile took a core from the node's compile job on a
    // 2-core host (push + first call of a JIT cargo: 9.5 against 8.8 ms polling 1.5 ms,
    // medians of 30 alternating; a native one's 1.73 against 1.67 ms, of 20), and a remote
    // node loses nothing either way.
    static constexpr std::chrono::microseconds kPushSpin{1500};
    static constexpr std::chrono::microseconds kWakeEarly{500};
    // A request in the lane not taken after this long while the node polls, or kUntakenIdleWait
    // while it sleeps (it was kicked), makes this thread sleep instead of spinning.
    static constexpr std::chrono::microseconds kUntakenWait{100};
    static constexpr std::chrono::microseconds kUntakenIdleWait{500};
    // A wait polling this long yields its core, and again as often.
    static constexpr std::chrono::microseconds kYieldEvery{100};
    UcxConnection& c_;
    const uint64_t kind_;
    const uint64_t sent_;
    bool untimed_ = true;
    int quiet_ = 0;
    Clock::time_point start_, deadline_, spin_until_, nap_until_, yielded_;
  };

  // Sleeps until UCX has an event or ms pass; a node writing a reply into the lane meanwhile
  // kicks this worker awake (wire-protocol.md 8.3).
  // The `cancel` of the awaited invoke, once asked for (Connection::cancel_due); through UCX,
  // never a lane (section 8.2). Its completion only frees the request: a lost connection
  // shows in the wait.
  void send_cancel_if_due() {
    const std::optional<ByteView> h = cancel_due();
    if (!h || !ep_) return;
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FIELD_CALLBACK;
    p.flags = UCP_AM_SEND_FLAG_REPLY;
    p.cb.send = [](void* request, ucs_status_t, void*) { UCX->ucp_request_free(request); };
    (void)UCX->ucp_am_send_nbx(ep_, unsigned(MsgType::cancel), h->data(), h->size(), nullptr, 0, &p);
  }
  void sleep(int ms) {
    if (lane_) {
      lane_.set_client_idle(true);
      lane::fence();
      if (lane_.replies().ready(lane_read_)) return lane_.set_client_idle(false);
    }
    w_->progress_or_wait(ms);
    check_lifeline();
    if (lane_) lane_.set_client_idle(false);
  }
  // Sends a request through the lane if it has one, the request fits a slot and a slot is free.
  // flush: tells a sleeping worker at once (lane_flush); else the caller does before it
  // waits (pipelined requests: a fence per request waited for each slot's cache lines).
  bool lane_send(MsgType type, ByteView header, ByteView data, bool flush = true) {
    if (!lane_ || type == MsgType::hello || type == MsgType::auth || type == MsgType::lane || !lane::fits(header, data)) return false;
    const lane::Ring r = lane_.requests();
    if (!r.has_room(lane_sent_, &lane_taken_)) return false;
    lane_ids_[lane_sent_ % lane::kSlots] = leading_request_id(type, header).value_or(0);
    r.write(lane_sent_++, type, header, data);
    lane_unflushed_ = true;
    if (flush) lane_flush();
    return true;
  }
  // After requests written into the lane: a kick if the worker may be asleep.
  void lane_flush() {
    if (!lane_unflushed_ || !lane_) return;
    lane_unflushed_ = false;
    lane::fence();
    if (lane_.worker_idle()) {  // it may be asleep: a kick wakes it (sealed, as every request)
      ucp_request_param_t p{};
      p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL;
      p.flags = UCP_AM_SEND_FLAG_REPLY;
      ucs_status_ptr_t req = UCX->ucp_am_send_nbx(ep_, unsigned(MsgType::kick), kick_.data(), kick_.size(), nullptr, 0, &p);
      if (UCS_PTR_IS_PTR(req)) UCX->ucp_request_free(req);  // not expected: FORCE_IMM_CMPL
    }
  }
  // Whether to call UCX's progress now. With a lane, while UCX has nothing to do, at most
  // every kLaneProgressEvery: a progress call over TCP is a system call (epoll_wait, 2 to
  // 3 us), and the lane's reply would wait it out. A reply through UCX (one too large for a
  // slot) may wait up to that longer to begin.
  bool progress_due() {
    if (!lane_ || ucx_busy_) return true;
    if (++lane_polls_ % 16 != 0) return false;
    const auto now = Clock::now();
    if (now - last_progress_ < kLaneProgressEvery) return false;
    last_progress_ = now;
    return true;
  }
  static constexpr std::chrono::microseconds kLaneProgressEvery{20};
  // Takes one reply from the lane, if one is there: true if one was. A reply to a pipelined
  // request goes into *into if given (its buffers reused: no allocation for its header),
  // *got then set; else it is queued in arrived_.
  bool lane_poll(Frame* into = nullptr, bool* got_into = nullptr) {
    MsgType type{};
    ByteView h, d;
    std::string why;
    const lane::Ring r = lane_.replies();
    const auto got = r.read(lane_read_, lane_buf_, &type, &h, &d, &why);
    if (got == lane::Ring::Got::nothing) return false;
    if (got == lane::Ring::Got::malformed) {
      failed_ = lane_malformed_ = true;
      fail_status_ = UCS_ERR_MESSAGE_TRUNCATED;
      return true;
    }
    r.taken(++lane_read_);
    const auto t = uint16_t(type);
    if (t == 0 || t % 2 != 0 || t > kMaxMsgType) return true;  // not a reply: dropped
    const auto id = leading_request_id(type, h);
    if (!awaited_.empty()) {
      if (!id || !take_awaited(*id)) return true;
      if (into) {
        into->type = type;
        into->header.assign(h.begin(), h.end());
        into->data.assign(d.begin(), d.end());
        *got_into = true;
        return true;
      }
      auto a = std::make_unique<Arrival>();
      a->self = this;
      a->frame = {type, Bytes(h.begin(), h.end()), Bytes(d.begin(), d.end())};
      a->ready = true;
      arrived_.push_back(std::move(a));
      return true;
    }
    if ((expect_id_ && id != expect_id_) || reply_ready_) return true;  // not the answer to this request
    reply_.type = type;
    reply_.header.assign(h.begin(), h.end());
    reply_.data.assign(d.begin(), d.end());
    reply_ready_ = true;
    return true;
  }

  // Before the handshake, UCX says "not connected" (or "unreachable") when its connection to
  // a listener was refused (tcp sockcm): nothing listens there.
  bool refused_by_listener() const {
    return !via_door_ && !handshaken() && (fail_status_ == UCS_ERR_NOT_CONNECTED || fail_status_ == UCS_ERR_UNREACHABLE);
  }
  Error lost() const {
    std::string why = UCX->ucs_status_string(fail_status_);
    Error e(Errc::unreachable, refused_by_listener() ? peer_ + ": connection refused (" + why + ")"
                               : (handshaken() ? "lost the connection to " : "could not reach ") + peer_ + ": " + why);
    e.hint(handshaken()            ? "the node may have stopped, or restarted after a kernel failed"
           : refused_by_listener() ? "is xcargo-loader running there with trusted-network, on this port? Its first log line says where it listens"
                                   : "is xcargo-loader running there?");
    if (!handshaken() && !via_door_ && local_ && !net::sysv_enabled(std::getenv("UCX_TLS")))
      e.hint("a loader on this host serves its user over shared memory (sysv), through its same-host door, which UCX_TLS "
             "leaves out here; only a loader with trusted-network has a UCX listener");
    std::string set;  // UCX settings that may keep it from reaching the node
    for (const char* var : {"UCX_TLS", "UCX_NET_DEVICES", "UCX_MAX_RNDV_LANES"})
      if (const char* v = std::getenv(var); v && *v) set += (set.empty() ? "" : " ") + std::string(var) + "=" + v;
    if (!handshaken() && !set.empty())
      e.hint(set + " is set: 'ucx_info -d' lists this machine's transports and devices (UCX_NET_DEVICES names them as 'ip link' does)");
    if (!handshaken() && std::getenv("UCX_MAX_RNDV_LANES"))
      e.hint("a loader on this machine must have the same UCX_MAX_RNDV_LANES, or UCX cannot connect over shared memory");
    return e;
  }
  bool handshaken() const { return node().max_cargo != 0; }

  static void on_error(void* arg, ucp_ep_h, ucs_status_t status) {
    auto* self = static_cast<UcxConnection*>(arg);
    self->failed_ = true;
    self->fail_status_ = status;
  }
  // Completion callbacks release their request: a request freed earlier gets no callback.
  static void on_sent(void* request, ucs_status_t status, void* user) {
    auto* self = static_cast<UcxConnection*>(user);
    self->send_done_ = true;
    self->send_req_ = nullptr;
    if (status != UCS_OK && status != UCS_ERR_CANCELED) self->failed_ = true, self->fail_status_ = status;
    UCX->ucp_request_free(request);
  }
  static void on_data(void* request, ucs_status_t status, size_t, void* user) {
    auto* self = static_cast<UcxConnection*>(user);
    if (status != UCS_OK) self->failed_ = true, self->fail_status_ = status;
    self->reply_ready_ = true;
    UCX->ucp_request_free(request);
  }
  // A reply to a pipelined request: queued, its data fetched if it comes by rendezvous.
  ucs_status_t arrive(MsgType type, const void* header, size_t header_length, void* data, size_t length,
                      const ucp_am_recv_param_t* param) {
    const auto id = leading_request_id(type, ByteView(static_cast<const uint8_t*>(header), header_length));
    if (!id || !take_awaited(*id)) return UCS_OK;  // not the answer to a request in flight
    auto a = std::make_unique<Arrival>();
    a->self = this;
    a->frame.type = type;
    const auto* h = static_cast<const uint8_t*>(header);
    a->frame.header.assign(h, h + header_length);
    if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) {
      a->frame.data = take_large(length);  // written whole by UCX before anyone reads it
      ucp_request_param_t p{};
      p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
      p.cb.recv_am = &UcxConnection::on_arrival_data;
      p.user_data = a.get();
      ucs_status_ptr_t r = UCX->ucp_am_recv_data_nbx(w_->worker(), data, a->frame.data.data(), length, &p);
      if (UCS_PTR_IS_ERR(r)) {
        failed_ = true;
        fail_status_ = UCS_PTR_STATUS(r);
        return UCS_OK;
      }
      a->ready = r == nullptr;  // else on_arrival_data completes it
    } else {
      const auto* d = static_cast<const uint8_t*>(data);
      a->frame.data.assign(d, d + length);
      a->ready = true;
    }
    arrived_.push_back(std::move(a));
    return UCS_OK;
  }
  static void on_arrival_data(void* request, ucs_status_t status, size_t, void* user) {
    auto* a = static_cast<Arrival*>(user);
    if (status != UCS_OK) a->self->failed_ = true, a->self->fail_status_ = status;
    else a->ready = true;
    UCX->ucp_request_free(request);
  }
  static void on_sent_out(void* request, ucs_status_t status, void* user) {
    auto* o = static_cast<Outgoing*>(user);
    o->done = true;
    if (status != UCS_OK && status != UCS_ERR_CANCELED) o->self->failed_ = true, o->self->fail_status_ = status;
    UCX->ucp_request_free(request);
  }

  static ucs_status_t on_reply(void* arg, const void* header, size_t header_length, void* data, size_t length,
                               const ucp_am_recv_param_t* param) {
    auto* slot = static_cast<Slot*>(arg);
    UcxConnection* self = slot->self;
    if (header_length > kMaxHeader || length > (1ull << 31)) {
      self->failed_ = true;
      self->fail_status_ = UCS_ERR_MESSAGE_TRUNCATED;
      return UCS_OK;
    }
    if (!self->awaited_.empty()) return self->arrive(MsgType(slot->type), header, header_length, data, length, param);
    if (self->expect_id_ &&
        leading_request_id(MsgType(slot->type), ByteView(static_cast<const uint8_t*>(header), header_length)) != self->expect_id_)
      return UCS_OK;  // not the answer to this request
    if (self->reply_ready_) return UCS_OK;  // one reply per request
    Frame& f = self->reply_;
    f.type = MsgType(slot->type);
    const auto* h = static_cast<const uint8_t*>(header);
    f.header.assign(h, h + header_length);
    if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) {
      f.data = take_large(length);  // written whole by UCX before anyone reads it
      ucp_request_param_t p{};
      p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
      p.cb.recv_am = &UcxConnection::on_data;
      p.user_data = self;
      ucs_status_ptr_t r = UCX->ucp_am_recv_data_nbx(self->w_->worker(), data, f.data.data(), length, &p);
      if (UCS_PTR_IS_ERR(r)) {
        self->failed_ = true;
        self->fail_status_ = UCS_PTR_STATUS(r);
      } else if (r == nullptr) {
        self->reply_ready_ = true;
      }  // else on_data completes it
      return UCS_OK;
    }
    const auto* d = static_cast<const uint8_t*>(data);
    f.data.assign(d, d + length);
    self->reply_ready_ = true;
    return UCS_OK;
  }

  void close() override {
    closed_ = true;
    drop();
  }

  bool pipelines() const override { return true; }

protected:
  // Pipelining: requests sent without waiting, their replies queued as they arrive.
  Status send_request(MsgType type, ByteView header, ByteView data) override {
    if (failed_) return lost();
    std::erase_if(outgoing_, [](const Outgoing& o) { return o.done; });
    const auto id = leading_request_id(type, header);
    if (!id) return Error(Errc::invalid_argument, "a pipelined request needs a request id");
    if (lane_send(type, header, data, false)) return awaited_.push_back(*id), Status{};
    auto failed = [&](ucs_status_ptr_t req) {
      return Error(Errc::unreachable, peer_ + ": send failed: " + UCX->ucs_status_string(UCS_PTR_STATUS(req)));
    };
    {  // Most requests are small and leave at once: then nothing needs to keep their header.
      ucp_request_param_t p{};
      p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL;
      p.flags = UCP_AM_SEND_FLAG_REPLY;
      ucs_status_ptr_t req = UCX->ucp_am_send_nbx(ep_, unsigned(type), header.data(), header.size(), data.data(), data.size(), &p);
      if (req == nullptr) return awaited_.push_back(*id), Status{};
      if (UCS_PTR_STATUS(req) != UCS_ERR_NO_RESOURCE) return failed(req);
    }
    Outgoing& o = outgoing_.emplace_back();
    o.self = this;
    o.header.assign(header.begin(), header.end());
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p.flags = UCP_AM_SEND_FLAG_REPLY;
    p.cb.send = &UcxConnection::on_sent_out;
    p.user_data = &o;
    ucs_status_ptr_t req = UCX->ucp_am_send_nbx(ep_, unsigned(type), o.header.data(), o.header.size(), data.data(), data.size(), &p);
    if (UCS_PTR_IS_ERR(req)) {
      outgoing_.pop_back();
      return failed(req);
    }
    if (req == nullptr) o.done = true;
    awaited_.push_back(*id);
    return {};
  }
  Result<Frame> next_reply() override {
    Frame f;
    if (auto s = next_reply_into(f); !s.ok()) return s.error();
    return f;
  }
  Status next_reply_into(Frame& f) override {
    Waiting wait(*this, kPipelined);
    for (;;) {
      for (auto it = arrived_.begin(); it != arrived_.end(); ++it)
        if ((*it)->ready) {
          f = std::move((*it)->frame);
          arrived_.erase(it);
          wait.done();
          return {};
        }
      bool got = false;
      if (failed_) {  // replies the node wrote into the lane before it ended still count (a ring's worth)
        for (uint32_t k = 0; k < lane::kSlots && lane_ && !lane_malformed_ && lane_poll(&f, &got); ++k)
          if (got) {
            wait.done();
            return {};
          }
        return lost();
      }
      if (lane_ && lane_poll(&f, &got)) {
        if (got) {
          wait.done();
          return {};
        }
        continue;
      }
      if (lane_unflushed_) {  // no reply to take: the requests sent since, before waiting
        lane_flush();
        continue;
      }
      if (progress_due() && (ucx_busy_ = UCX->ucp_worker_progress(w_->worker()) != 0)) continue;
      if (!wait.idle()) {
        unanswered_ = true;
        return Error(Errc::unreachable, peer_ + ": no reply within " + duration_text(timeout_ms_));
      }
    }
  }

  std::vector<uint64_t> never_read() const override {
    std::vector<uint64_t> ids;
    if (!failed_ || !lane_ || !lane_.worker_ended()) return ids;
    // Its worker copies out no more: what it had not copied did not run (wire-protocol.md 8.4).
    // At most a ring's worth (the worker's count is not trusted to be sane).
    const uint64_t first = std::max(lane_.requests().taken_now(), lane_sent_ > lane::kSlots ? lane_sent_ - lane::kSlots : 0);
    for (uint64_t i = first; i < lane_sent_; ++i)
      if (const uint64_t id = lane_ids_[i % lane::kSlots]) ids.push_back(id);
    return ids;
  }

private:
  // Closes the endpoint; the connection may be made again (reconnect).
  void drop() {
    if (lane_) {  // a new connection asks for a lane of its own
      lane::detach(lane_);
      lane_ = {};
      lane_sent_ = lane_read_ = lane_taken_ = 0;
      lane_unflushed_ = false;
    }
    if (!ep_) {
      failed_ = true;
      return;
    }
    for (auto& [address, rkey] : rkeys_) UCX->ucp_rkey_destroy(rkey);  // before their endpoint
    rkeys_.clear();
    // A node that left a request unanswered may never answer the close either: UCX 1.13
    // aborts in ucp_worker_destroy on an endpoint whose graceful close did not finish
    // ("pending request ... should have been flushed"), so such an endpoint is closed by force.
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    p.flags = failed_ || unanswered_ ? UCP_EP_CLOSE_FLAG_FORCE : 0;
    ucs_status_ptr_t r = UCX->ucp_ep_close_nbx(ep_, &p);
    if (r && !UCS_PTR_IS_ERR(r)) {
      const auto deadline = Clock::now() + std::chrono::milliseconds(500);
      while (UCX->ucp_request_check_status(r) == UCS_INPROGRESS && Clock::now() < deadline) UCX->ucp_worker_progress(w_->worker());
      UCX->ucp_request_free(r);
    }
    ep_ = nullptr;
    close_lifeline();  // after the endpoint: the loader then closes its own
    failed_ = true;
    fail_status_ = UCS_ERR_NOT_CONNECTED;
  }

  std::unique_ptr<net::UcxWorker> w_;
  ConnectOptions o_;  // for reconnect()
  ucp_ep_h ep_ = nullptr;
  int lifeline_ = -1;     // the same-host door's connection, when the endpoint came through it
  bool via_door_ = false;  // endpoints come through the door (open() found one of this user's)
  bool local_ = false;     // the address is a loopback one
  int door_first_ = -1;    // the door's connection open() made, for the first endpoint
  std::string door_at_;    // the door's name: the address resolved, as the loader names it
  door::Ticket ticket_{};
  static constexpr std::chrono::milliseconds kDoorLimit{2000};  // the loader's keeper answers at once
  std::string peer_;
  int timeout_ms_ = 5000;
  Clock::time_point attached_at_{};  // the endpoint's connection (Waiting sleeps 1 ms at a time for a while)
  static constexpr std::chrono::milliseconds kWaryAfterConnect{500};
  Clock::duration last_wait_{};  // the last reply's wait, and its kind (wait_kind), for Waiting
  uint64_t last_kind_ = kOther;
  Slot slots_[kMaxMsgType + 1] = {};
  Frame reply_;
  std::optional<uint64_t> expect_id_;  // the request id the reply must carry
  // Pipelined requests: their headers until UCX has sent them, the ids still unanswered, and
  // the replies that arrived (a rendezvous one ready once its data is in).
  struct Outgoing {
    UcxConnection* self = nullptr;
    Bytes header;
    bool done = false;
  };
  struct Arrival {
    UcxConnection* self = nullptr;
    Frame frame;
    bool ready = false;
  };
  std::list<Outgoing> outgoing_;
  std::deque<uint64_t> awaited_;  // in the order sent, which is mostly the order answered
  // Whether id is awaited; no longer, if it was. The oldest first: a scan of 64 ids in flight
  // took a tenth of a pipelined invocation's time on the client.
  bool take_awaited(uint64_t id) {
    if (awaited_.empty()) return false;
    if (awaited_.front() == id) return awaited_.pop_front(), true;
    const auto at = std::find(awaited_.begin(), awaited_.end(), id);
    if (at == awaited_.end()) return false;
    awaited_.erase(at);
    return true;
  }
  std::deque<std::unique_ptr<Arrival>> arrived_;
  bool reply_ready_ = false, send_done_ = false, failed_ = false, one_sided_ = false;
  bool unanswered_ = false;  // a request went unanswered past its time limit
  bool closed_ = false;      // close() was called: no more requests
  bool lane_malformed_ = false;  // the lane held a malformed reply: read no more of it
  void* send_req_ = nullptr;
  std::map<uint64_t, ucp_rkey_h> rkeys_;  // unpacked remote keys, by region address
  lane::Segment lane_;                     // the node's shared-memory lane, if any (section 8)
  uint64_t lane_sent_ = 0, lane_read_ = 0; // requests written to it, replies read from it
  std::array<uint64_t, lane::kSlots> lane_ids_{};  // the request id of each message in the request ring (never_read)
  uint64_t lane_taken_ = 0;                // the node's count of requests taken, as last read
  Bytes lane_buf_;                         // a reply copied out of it
  Bytes kick_;                             // a kick's header: the session token
  uint64_t lane_polls_ = 0;                // progress_due
  bool lane_unflushed_ = false;            // requests written since the last lane_flush
  bool ucx_busy_ = false;                  // the last progress call did something
  Clock::time_point last_progress_{};
  ucs_status_t fail_status_ = UCS_OK;
};

}  // namespace

Result<Route> route_of(const std::string& address) {
  NodeAddress a = split_scheme(address);
  if (a.scheme == NodeAddress::Scheme::tls || a.scheme == NodeAddress::Scheme::ucx)
    return Route{a.scheme == NodeAddress::Scheme::tls, std::move(a.host_port), a.scheme == NodeAddress::Scheme::ucx};
  if (a.scheme == NodeAddress::Scheme::other)
    return Error(Errc::invalid_argument, address + ": not an address a node serves")
        .hint("use HOST:PORT, tls://HOST:PORT (a node's TLS front door) or ucx://HOST:PORT (UCX, on a network whose "
              "every host is trusted)");
  auto ip = net::parse_host_port(address);
  XC_TRY(ip);
  return Route{!net::is_loopback(*ip), address};
}

Result<std::unique_ptr<Connection>> connect(const std::string& host_port, const ConnectOptions& options) {
  // The identity once, before connecting: not again at each retry, and not on the node's clock.
  auto identity = load_identity(options);
  XC_TRY(identity);
  ConnectOptions o = options;
  o.identity_key = *identity;
  auto route = route_of(host_port);
  XC_TRY(route);
  Attempt attempt = [&](int timeout_ms, TryFailure* how) -> Result<std::unique_ptr<Connection>> {
    auto c = std::make_unique<UcxConnection>();
    XC_TRY(c->open(route->host_port, o, route->ucx_listener, timeout_ms, how));
    return std::unique_ptr<Connection>(std::move(c));
  };
  if (route->tls) {
    auto a = tls_attempt(route->host_port, o);
    if (!a.ok() && route->host_port == host_port)  // a bare address: say why TLS
      return Error(a.error())
          .hint(host_port + " is not a loopback address: it is reached over TLS (its node's front door, --tls-listen); "
                "ucx://" + host_port + " reaches a loader on a network whose every host is trusted");
    XC_TRY(a);
    attempt = std::move(*a);
  }
  // Every try, and the waits between them, within connect_timeout_ms. A refused connection is
  // tried again within refused_retry_ms, at a same-host door not at all (refused_retry_ms).
  // Other failures to reach the node (a door that says its loader is replacing its worker, a
  // connection lost in its handshake) are tried again, but a peer that does not speak TLS 1.3
  // (not_a_loader); a last try that only ran out of time reports the one before.
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::milliseconds(options.connect_timeout_ms);
  const auto refused_until = start + std::chrono::milliseconds(options.refused_retry_ms);
  std::optional<Error> earlier;
  for (int tries = 0;; ++tries) {
    TryFailure how;
    auto c = attempt(int(std::min<int64_t>(ms_until(deadline), kTryLimit.count())), &how);
    if (c.ok()) return c;
    if (how.timed_out && earlier)
      return std::move(earlier->hint("tried again until the connect timeout (" + duration_text(options.connect_timeout_ms) +
                                     ") ran out"));
    const auto pause = std::chrono::milliseconds(std::min(2 << std::min(tries, 5), 50));
    const bool refused_done = how.refused && (how.refused_for_good || Clock::now() + pause >= refused_until);
    if (c.error().code() != Errc::unreachable || refused_done || how.not_a_loader || Clock::now() + pause >= deadline)
      return c.take_error();
    earlier = c.take_error();
    std::this_thread::sleep_for(pause);
  }
}

}  // namespace xcargo::client
