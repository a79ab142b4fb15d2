// The worker's TLS front door: its credentials (renewed), who may complete a handshake, and
// how its connections' events reach the server (UcxServer::Impl, server_impl.h).
#include "server/server_impl.h"

#include <unistd.h>

#include <utility>

namespace xcargo::loader {

using namespace wire;
using namespace server_detail;

namespace {

// The front door as the server's transport (transport.h): its connections are the Ep that
// are TLS. It never sleeps for the server: UCX's worker watches its descriptor.
class TlsTransport final : public Transport {
public:
  explicit TlsTransport(UcxServer::Impl& m) : m_(m) {}
  std::string unread_over_limit(Ep ep, const Client&, uint64_t size) const override {
    return m_.tls_unread_over_limit(*ep.tls_conn(), size);
  }
  void send(Ep ep, Reply&& r, Client*) override {
    m_.front->send(*ep.tls_conn(), r.type, r.header, std::move(r.data));
    give_spare(std::move(r.header));
  }
  // A message fails here only if its connection already had: one queued when the connection
  // is lost later is not reported (its client waits out its time-out).
  void send_peer(Ep ep, Reply&& r, Failed on_fail) override {
    if (!m_.front->send(*ep.tls_conn(), r.type, r.header, std::move(r.data)) && on_fail) on_fail("the TLS connection failed");
    give_spare(std::move(r.header));
  }
  void close(Ep ep) override { m_.front->close(ep.tls_conn()); }
  bool poll() override { return m_.front->poll(); }
  bool sending() const override { return m_.front->queued_total() > 0; }
  void sweep(Clock::time_point now) override {
    if (const std::string why = m_.front->deaf(); !why.empty() && !m_.restart) {
      const std::string what = "the TLS front door cannot take new clients: " + why;
      m_.report_failure(what + "; restarting the worker", what);
      m_.restart = true;
      return;
    }
    m_.tls_refusals->flush();
    m_.front->sweep(now, m_.opt.auth_deadline, timing::transfer_deadline);
    if (now >= m_.renew_tls_at) m_.renew_tls(now);
  }
  void stop_listening() override { m_.front->stop_listening(); }

private:
  UcxServer::Impl& m_;
};

}  // namespace

Result<std::shared_ptr<tls::Context>> UcxServer::Impl::tls_context() const {
  auto credential = opt.gate->node_key().tls_credential();
  XC_TRY(credential);
  const AuthGate* gate = opt.gate;
  return tls::Context::create(tls::Context::server, *credential, [gate](const tls::Peer& p, std::string* why) {
    return gate->admits(p.identity, p.certified, why);
  });
}

void UcxServer::Impl::renew_tls(Clock::time_point now) {
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

Result<std::shared_ptr<tls::Context>> UcxServer::Impl::peer_tls_context() const {
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

Status UcxServer::Impl::open_front_door(std::chrono::milliseconds wait) {
  auto context = tls_context();
  XC_TRY(context);
  auto peer_context = peer_tls_context();
  XC_TRY(peer_context);
  peer_tls = std::move(*peer_context);
  tls_refusals = std::make_unique<LineLimit>([this](std::string_view l) { log(l); });
  FrontDoor::Events ev;
  ev.accepted = [this](TlsConn& c) {
    const std::string host = c.peer.substr(0, c.peer.rfind(':'));
    make_room_for(host);
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
  ev.dial_answer = [this](uint64_t id, int fd, const std::string& what) { tls_dialed(id, fd, what); };
  ev.max_data = [this] { return std::max(handler->max_cargo() + handler->max_input(), handler->max_reply()); };
  // As the bytes a key's requests may hold in flight (in_flight.h), and for all keys the
  // same times kPartialKeys.
  ev.max_partial_per_key = [this] { return kBytesInFlightPerKey * largest_request(); };
  ev.max_partial_total = [this] { return kPartialKeys * kBytesInFlightPerKey * largest_request(); };
  const bool kept = opt.tls_fd >= 0;
  if (kept) tls_address = opt.tls_listen;  // the keeper's, resolved
  auto door = kept ? FrontDoor::from_keeper(std::exchange(opt.tls_fd, -1), std::move(*context), std::move(ev))
                   : FrontDoor::listen(opt.tls_listen, std::move(*context), std::move(ev), wait, &tls_address);
  XC_TRY(door);
  XC_TRY(w->watch((*door)->fd()));
  front = std::move(*door);
  tls_transport = std::make_unique<TlsTransport>(*this);
  renew_tls_at = Clock::now() + timing::kRenewTls;
  return {};
}

uint64_t UcxServer::Impl::tls_dial(const std::string& host_port) {
  if (!front || !front->keeper_dials() || !peer_tls) return 0;
  const uint64_t id = next_dial++;
  std::string why;
  if (!front->ask_dial(id, host_port, &why)) {
    log("cannot dial node at " + host_port + ": " + why);
    return 0;
  }
  tls_dials[id] = host_port;
  return id;
}

void UcxServer::Impl::tls_dialed(uint64_t id, int fd, const std::string& what) {
  const auto it = tls_dials.find(id);
  if (it == tls_dials.end()) {  // not this worker's dial (a kernel's), or answered twice
    if (fd >= 0) ::close(fd);
    return;
  }
  const std::string host_port = std::move(it->second);
  tls_dials.erase(it);
  if (fd < 0) return peers->dial_failed(id, what);
  std::string why;
  TlsConn* c = front->adopt_dialed(fd, host_port, peer_tls, &why);
  if (!c) return peers->dial_failed(id, host_port + ": " + why);
  if (!peers->dialed(id, Ep::tls(c))) front->close(c);  // nobody waits for it any more
}

std::string UcxServer::Impl::tls_unread_over_limit(const TlsConn& c, uint64_t size) const {
  const uint64_t queued = front->queued(c), limit = kBytesInFlightPerConnection * largest();
  if (queued + size <= limit) return {};
  return "its client has not read " + std::to_string(queued) + " bytes of replies, and " + std::to_string(size) +
         " more would pass the limit of " + std::to_string(limit);
}

}  // namespace xcargo::loader
