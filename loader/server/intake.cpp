// Intake: the rules a message from a client connection meets before it may run.
#include "server/intake.h"

namespace xcargo::loader {

using namespace wire;
using Clock = std::chrono::steady_clock;

bool Intake::screen(MsgType type, Connections::Ep ep, Client* client, ByteView* header) {
  ByteView hv = *header;
  // A refused connection's requests go unanswered, but for the worker's own probe's hello
  // (it may connect while one host crowds the node).
  if (client && client->doomed && !(type == MsgType::hello && probe_hello(*client, hv))) return false;
  // On an authenticated connection every request ends with its session token. A transport
  // may let a peer name another's connection (UCX names it by an id its sender writes), so
  // a message without the token is dropped unanswered: nothing is sent to, or done as, the
  // connection it claims.
  if (client && client->session.authenticated) {
    ByteView body;
    if (type == MsgType::hello || type == MsgType::auth || !AuthGate::sealed(client->session, hv, &body)) {
      if (unsealed_.due())
        log_("dropped a message of type " + std::to_string(int(type)) + " that claimed the connection of " + client->session.who +
             " from " + client->peer + " without its session token (" + std::to_string(unsealed_.count()) + " such so far)");
      return false;
    }
    hv = body;
  }
  if (type == MsgType::hello && client) return greet(ep, *client, hv), false;
  if (type == MsgType::auth && client) return authenticate(ep, *client, hv), false;
  if (!gate_.permits(AuthGate::session_of(client ? &client->session : nullptr), type)) return deny(ep, client, type, hv), false;
  *header = hv;
  return true;
}

bool Intake::admit(MsgType type, Connections::Ep ep, Client* client, ByteView header, uint64_t length,
                   std::optional<Charge>* charge) {
  if (!client || type == MsgType::forward) return true;  // the hop limit bounds forwards
  if (std::string why = over_limit(client->usage.get(), client->key_usage.get(), length, largest_); !why.empty())
    return refuse_limit(ep, *client, type, header, why), false;
  // Data over the node's limit is never fetched (the handler answers `limit` from the header).
  charge->emplace(client->usage, client->key_usage, length <= largest_request_ ? length : 0);
  return true;
}

bool Intake::probe_hello(Client& c, ByteView header) {
  auto h = decode_hello(header);
  if (!h.ok() || !host_.is_probe(*h)) return false;
  c.probe = true;
  c.doomed = false;
  return true;
}

// hello and auth, answered at once: the connection's authentication (AuthGate).
void Intake::greet(Connections::Ep ep, Client& c, ByteView header) {
  auto h = decode_hello(header);
  if (!h.ok()) return host_.send(ep, host_.bad_request(h.error().message()));
  // The address a hello names is not used: a chain's result reaches the client through
  // this node, by the relay address it makes (wire-protocol.md 4.13).
  if (host_.is_probe(*h)) {
    c.probe = true;
    host_.probe_greeted(c);
  }
  Reply base = host_.hello_reply(header);
  auto r = decode_hello_reply(base.header);
  if (!r.ok()) return host_.send(ep, host_.bad_request("hello: " + r.error().message()));
  if (r->status != ReplyStatus::ok) {  // answered (unsupported_version), then closed: no session
    Connections::doom(c, Clock::now());
    return host_.send(ep, std::move(base));
  }
  if (auto s = gate_.greet(c.session, *h, *r); !s.ok()) {
    log_("cannot answer the hello from " + c.peer + ": " + s.error().message());
    r->status = ReplyStatus::internal;
  }
  host_.send(ep, {MsgType::hello_reply, encode(*r), {}});
}

void Intake::authenticate(Connections::Ep ep, Client& c, ByteView header) {
  auto a = decode_auth(header);
  if (!a.ok()) return host_.send(ep, host_.bad_request(a.error().message()));
  std::string line;
  AuthReply r = gate_.check(c.session, *a, &line);
  if (r.status == ReplyStatus::ok && eps_.connections_of(c.session.who) > kMaxConnectionsPerKey) {
    r = AuthReply{r.request_id, ReplyStatus::unauthenticated, 0, {},
                  "this key has " + std::to_string(kMaxConnectionsPerKey) + " connections open, the node's limit per key"};
    line += "; refused: " + r.message;
    c.session.authenticated = false;
    c.session.verbs = 0;
    c.session.token = {};
  }
  log_((r.status == ReplyStatus::ok ? "accepted client from " : "refused client from ") + c.peer + ": " + line);
  host_.flush_log();
  if (r.status != ReplyStatus::ok) {
    Connections::doom(c, Clock::now());
  } else {
    eps_.authenticated(c);
    c.origin = std::make_shared<const std::string>("from " + c.peer + " " + c.session.who);
  }
  host_.send(ep, {MsgType::auth_reply, encode(r), {}});
}

void Intake::deny(Connections::Ep ep, Client* c, MsgType type, ByteView header) {
  const std::string why = gate_.refusal(AuthGate::session_of(c ? &c->session : nullptr), type);
  bool closing = false;
  // A flood of refusals must not fill the log: a connection's are counted against it (and
  // close it); those on an endpoint that is no connection are logged once a second.
  if (!c && strangers_.due())
    log_("refused request type " + std::to_string(int(type)) + " from a peer that is no connection: " + why + " (" +
         std::to_string(strangers_.count()) + " such so far)");
  if (c && eps_.refused(*c, Clock::now(), &closing))
    log_("refused request type " + std::to_string(int(type)) + " from " + c->peer + ": " + why);
  if (closing) log_("closing the connection from " + c->peer + ": " + std::to_string(c->refusals) + " requests before authenticating");
  if (!ep) return;  // a forward without a reply endpoint: nobody to tell
  if (type == MsgType::cancel) return;  // it has no reply (wire-protocol.md 4.15), even refused
  ResultMsg m;
  m.request_id = request_id_of(type, header);
  m.status = ReplyStatus::unauthenticated;
  m.message = why;
  host_.send(ep, {MsgType::result, encode(m), {}});
}

void Intake::refuse_limit(Connections::Ep ep, Client& c, MsgType type, ByteView header, const std::string& why) {
  if (limited_.due())
    log_("refused a request from " + c.peer + (c.session.who.empty() ? "" : " (" + c.session.who + ")") + ": " + why + " (" +
         std::to_string(limited_.count()) + " such so far)");
  ResultMsg m;
  m.request_id = request_id_of(type, header);
  m.status = ReplyStatus::limit;
  m.message = why + "; wait for replies before sending more";
  host_.send(ep, {MsgType::result, encode(m), {}});
}

}  // namespace xcargo::loader
