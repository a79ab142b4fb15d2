// connect() to "tls://HOST:PORT": the wire protocol's frames in TLS 1.3 records
// (format-spec/wire-protocol.md 2.3), the client proving its identity in the handshake and
// the node its key, which must be the one this client expects (known nodes, or the caller's).
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "client/connect_time.h"
#include "client/session.h"
#include "client/tls_client.h"
#include "auth/auth.h"
#include "auth/known_nodes.h"
#include "net/door.h"
#include "net/tls.h"
#include "net/ucx.h"

namespace xcargo::client {

using namespace wire;
using Clock = std::chrono::steady_clock;

namespace {

// Largest reply data taken: a reply's buffer grows with the bytes that arrive (tls.h).
constexpr uint64_t kMaxReplyData = 1ull << 33;
// How long a wait for a reply polls before it sleeps.
constexpr auto kSpin = std::chrono::microseconds(200);
// How long a wait for a reply sleeps at most before it looks for a cancel_invoke().
constexpr auto kCancelLook = std::chrono::milliseconds(200);

class TlsConnection final : public Session {
public:
  ~TlsConnection() override { close(); }
  std::string peer() const override { return "tls://" + address_; }
  void close() override {
    if (channel_) {
      if (channel_->queued() && !failed_) (void)channel_->flush();  // what the socket takes now
      channel_->close();
    }
    channel_.reset();
  }
  bool pipelines() const override { return true; }
  const wire::RawKey* proven_node_key() const override { return &node_key_.raw; }

  // Connects and performs both handshakes within timeout_ms; on failure, *how says why.
  Status open(const std::string& address, const ConnectOptions& o, const PublicKey& node_key, int timeout_ms, TryFailure* how) {
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    address_ = address;
    o_ = o;
    node_key_ = node_key;
    std::shared_ptr<const SigningKey> identity = o.identity_key;
    if (!identity) {  // an open node takes a client without one: a key made for this connection
      auto k = SigningKey::generate();
      XC_TRY(k);
      identity = std::make_shared<const SigningKey>(std::move(*k));
    }
    route_.key = identity->public_key().raw;
    auto credential = tls::Credential::self_signed(*identity);
    XC_TRY(credential);
    const PublicKey expected = node_key;
    auto context = tls::Context::create(tls::Context::client, *credential, [expected](const tls::Peer& p, std::string* why) {
      if (p.certified && p.identity == expected.raw) return true;
      *why = "the node proved key " + to_hex(key_id_of(p.identity)) + ", not the expected " + to_hex(expected.id);
      return false;
    });
    XC_TRY(context);
    context_ = std::move(*context);
    ::signal(SIGPIPE, SIG_IGN);  // a node that went away must give an error, not kill us
    auto s = attach(deadline, &how->refused, &how->not_a_loader);
    how->refused_for_good = how->refused;  // a loader's supervisor listens for its front door across worker restarts
    how->timed_out = timed_out_;
    return s;
  }

protected:
  Result<Frame> roundtrip(MsgType type, ByteView header, ByteView data) override {
    XC_TRY(send_request(type, header, data));
    Frame f;
    XC_TRY(next_reply_into(f));
    return f;
  }
  Status send_request(MsgType type, ByteView header, ByteView data) override {
    if (!channel_) return lost("the connection is closed");
    auto io = channel_->send_view(type, header, data);  // data stays valid until its reply (client.h)
    if (!io.ok()) return fail(io.error());
    sent_since_reply_ = true;
    return {};
  }
  Result<Frame> next_reply() override {
    Frame f;
    XC_TRY(next_reply_into(f));
    return f;
  }
  Status next_reply_into(Frame& f) override {
    if (!channel_) return lost("the connection is closed");
    const auto start = Clock::now();
    const auto deadline = start + std::chrono::milliseconds(timeout_ms_);
    // A reply usually follows within microseconds: the socket is polled a little before this
    // end sleeps in poll(), whose wake-up costs more than the whole round trip here. The spin
    // counts from the last bytes that came or went (a large transfer moves in many pieces,
    // and sleeping between them would cost a wake-up each). It asks whether the socket is
    // ready (poll with no wait) rather than reading it: a read that finds nothing costs a
    // system call and takes the socket's lock, which the arriving reply's delivery then
    // waits for.
    auto spin_from = start;
    uint64_t moved = channel_->received() + channel_->queued();
    bool needs_socket = false;  // the last receive() stopped for the socket
    for (;;) {
      if (const uint64_t m = channel_->received() + channel_->queued(); m != moved) {
        moved = m;
        spin_from = Clock::now();
      }
      // Requests are held (send_request), and leave together when this end would read the
      // socket: not while whole replies already read wait inside OpenSSL. What is still queued
      // goes out while the reply is awaited: a node answering earlier requests must not wait
      // for this client to read before it can take the rest. (Queued bytes left after a
      // flush mean the socket is full: only then is it polled for writing.)
      if (channel_->queued() && (needs_socket || !channel_->buffered())) {
        auto out = channel_->flush();
        if (!out.ok()) return fail(out.error());
      }
      if (needs_socket || !channel_->buffered()) {
        const short events = short(POLLIN | (channel_->queued() ? POLLOUT : 0));
        if (!spin_until(events, spin_from)) XC_TRY(wait(events, deadline, "reply"));
      }
      auto io = channel_->receive(f, kMaxReplyData);
      if (!io.ok()) return fail(io.error());
      if (*io == tls::Channel::Io::done) {
        sent_since_reply_ = false;
        return {};
      }
      if (*io == tls::Channel::Io::closed) return fail(Error(Errc::unreachable, "the node closed the connection"));
      needs_socket = true;
    }
  }
  bool lost_before_sending() const override { return failed_ && !sent_since_reply_ && handshaken_; }
  Status reconnect() override {
    const auto give_up = Clock::now() + std::chrono::milliseconds(o_.retry_ms);
    for (int tries = 0;; ++tries) {
      auto s = attach(Clock::now() + std::chrono::milliseconds(o_.connect_timeout_ms), nullptr);
      if (s.ok() || s.error().code() != Errc::unreachable || Clock::now() > give_up) return s;
      std::this_thread::sleep_for(std::chrono::milliseconds(std::min(1 << std::min(tries, 5), 20)));
    }
  }

private:
  // A TCP connection, the TLS handshake over it, then the wire protocol's handshake, by
  // deadline. *refused (if given): the TCP connection was refused; *not_tls (if given): the
  // peer's bytes were not a TLS 1.3 handshake (a closed connection is not that: a worker
  // ending may close one that reached it).
  Status attach(Clock::time_point deadline, bool* refused, bool* not_tls = nullptr) {
    close();
    failed_ = handshaken_ = sent_since_reply_ = timed_out_ = false;
    auto fd = dial(deadline, refused);
    XC_TRY(fd);
    auto ch = tls::Channel::start(context_, *fd);
    if (!ch.ok()) {
      ::close(*fd);
      return ch.take_error();
    }
    channel_ = std::move(*ch);
    channel_->hold(true);  // requests leave when the client waits for replies (next_reply_into)
    timeout_ms_ = o_.connect_timeout_ms;  // for wait()'s message
    for (;;) {
      auto io = channel_->handshake();
      if (!io.ok()) {
        // The node's front door refused the route (a key it does not serve) in place of TLS.
        if (std::optional<Error> no = door::refusal_in(channel_->first_bytes(), peer())) {
          close();
          return *no;
        }
        if (not_tls && io.error().code() == Errc::unreachable && !channel_->closed_in_handshake()) *not_tls = true;
        close();
        Error e(io.error().code(), peer() + ": TLS handshake: " + io.error().message());
        if (io.error().code() == Errc::unauthenticated)
          e.hint("the node is not the one " + (o_.known_nodes.empty() ? std::string("expected") : o_.known_nodes + " pins") +
                 " for this address; if its key changed on purpose, its admin can say which key it has now");
        return e;
      }
      if (*io == tls::Channel::Io::done) break;
      XC_TRY(wait(*io == tls::Channel::Io::want_write ? POLLOUT : POLLIN, deadline, "TLS handshake"));
    }
    timeout_ms_ = ms_until(deadline);
    Status hs = handshake(o_.identity_key.get(), o_.identity.empty() ? auth::default_identity_path() : o_.identity);
    timeout_ms_ = o_.reply_timeout_ms;
    if (!hs.ok()) {
      close();
      if (timed_out_)
        return Error(Errc::unreachable, peer() + ": no answer within the connect timeout (" + duration_text(o_.connect_timeout_ms) + ")")
            .hint("the loader there may be stopped (SIGSTOP), overloaded, or not a loader");
      return hs;
    }
    handshaken_ = true;
    return {};
  }

  Result<int> dial(Clock::time_point deadline, bool* refused) {
    socklen_t len = 0;
    auto addr = net::parse_host_port(address_, &len);
    XC_TRY(addr);
    const int fd = ::socket(addr->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return Error(Errc::unreachable, peer() + ": socket: " + std::strerror(errno));
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // a request leaves at once
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&*addr), len) != 0 && errno != EINPROGRESS) {
      const int e = errno;
      ::close(fd);
      return unreachable(e, refused);
    }
    pollfd p{fd, POLLOUT, 0};
    const int ms = int(std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count()));
    if (::poll(&p, 1, ms) != 1) {
      ::close(fd);
      timed_out_ = true;
      return Error(Errc::unreachable, peer() + ": no answer within the connect timeout (" + duration_text(o_.connect_timeout_ms) + ")")
          .hint("is the host up, and does a firewall let this port through? Nothing answered, not even a refusal");
    }
    int err = 0;
    socklen_t el = sizeof err;
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el);
    if (err != 0) {
      ::close(fd);
      return unreachable(err, refused);
    }
    // The route first (wire-protocol.md 2.3): the key this end proves in the handshake.
    const auto left = std::chrono::milliseconds(std::max<int64_t>(1, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count()));
    if (auto s = door::write_frame(fd, door::route(route_), left); !s.ok()) {
      ::close(fd);
      return Error(Errc::unreachable, peer() + ": " + s.error().message() + " (sending the route)");
    }
    return fd;
  }
  Error unreachable(int e, bool* refused) const {
    if (e == ECONNREFUSED) {
      if (refused) *refused = true;
      return Error(Errc::unreachable, peer() + ": connection refused")
          .hint("is xcargo-loader running there with --tls-listen, on this port? Its first log line says where it listens");
    }
    return Error(Errc::unreachable, "could not reach " + peer() + ": " + std::strerror(e))
        .hint("is xcargo-loader running there with --tls-listen?");
  }

  // Whether the socket became ready for EVENTS within kSpin of FROM, asking without sleeping.
  bool spin_until(short events, Clock::time_point from) const {
    pollfd p{channel_->fd(), events, 0};
    do {
      if (::poll(&p, 1, 0) != 0) return true;  // ready, closed, or an error: the next call says which
    } while (Clock::now() - from < kSpin);
    return false;
  }
  // Until the socket is ready for EVENTS, or the deadline.
  Status wait(short events, Clock::time_point deadline, const char* what) {
    pollfd p{channel_->fd(), events, 0};
    for (;;) {
      if (std::optional<ByteView> cancel = cancel_due()) {  // leaves with the next flush, while the reply is awaited
        auto io = channel_->send_view(MsgType::cancel, *cancel, {});
        if (!io.ok()) return fail(io.error());
        auto out = channel_->flush();
        if (!out.ok()) return fail(out.error());
        p.events = short(POLLIN | (channel_->queued() ? POLLOUT : 0));
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) break;
      // Woken at least every kCancelLook: cancel_invoke() from another thread is sent soon.
      const int n = ::poll(&p, 1, int(std::min<int64_t>(left, kCancelLook.count())));
      if (n > 0) return {};
      if (n < 0 && errno != EINTR) return fail(Error(Errc::unreachable, std::string("poll: ") + std::strerror(errno)));
    }
    failed_ = timed_out_ = true;
    close();
    return Error(Errc::unreachable, peer() + ": no " + what + " within " + duration_text(timeout_ms_));
  }
  Error fail(const Error& e) {
    failed_ = true;
    close();
    if (e.code() == Errc::unauthenticated)  // TLS 1.3: the node's refusal arrives after the client's handshake
      return Error(Errc::unauthenticated, peer() + ": the node refused this client's key: " + e.message())
          .hint("the node's admin adds your identity's .pub to its clients; --identity KEY names another identity");
    return lost(e.message());
  }
  Error lost(const std::string& why) const {
    return Error(Errc::unreachable, peer() + ": lost the connection: " + why)
        .hint("the node may have been restarted, or be refusing this client: its log says why");
  }

  std::string address_;
  door::Route route_;  // what a connection says first: the key this end proves
  ConnectOptions o_;
  PublicKey node_key_;
  std::shared_ptr<tls::Context> context_;
  std::unique_ptr<tls::Channel> channel_;
  int timeout_ms_ = 5000;
  bool failed_ = false, handshaken_ = false, sent_since_reply_ = false;
  bool timed_out_ = false;  // attach() ran out of time (dial, wait)
};

}  // namespace

Result<Attempt> tls_attempt(const std::string& address, const ConnectOptions& options) {
  if (auto a = net::parse_host_port(address, nullptr); !a.ok())
    return Error(a.error().code(), "tls://" + address + ": " + a.error().message());
  PublicKey node_key;
  if (options.node_key) {
    node_key = *options.node_key;
  } else {
    const std::string path = options.known_nodes.empty() ? auth::default_known_nodes_path() : options.known_nodes;
    auto known = auth::KnownNodes::load(path);
    XC_TRY(known);
    const auth::KnownNodes::Node* n = known->find(address);
    if (!n)
      return Error(Errc::unauthenticated, "tls://" + address + ": this node's key is not known (" +
                                              (path.empty() ? std::string("no known-nodes file") : path) + " does not pin it)")
          .hint("pin it with the node's public key: xcargo known-nodes add " + address + " NODE.pub (its admin has the file, "
                "or the loader's first log line names the key's id)")
          .hint("in a cluster, scripts/cluster pins its nodes from the cluster file");
    node_key = n->key;
  }
  return Attempt([address, options, node_key](int timeout_ms, TryFailure* how) -> Result<std::unique_ptr<Connection>> {
    auto c = std::make_unique<TlsConnection>();
    XC_TRY(c->open(address, options, node_key, timeout_ms, how));
    return std::unique_ptr<Connection>(std::move(c));
  });
}

}  // namespace xcargo::client
