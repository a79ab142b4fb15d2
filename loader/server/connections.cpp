// Connections: the table of accepted connections and when they are closed.
#include "server/connections.h"

#include <utility>

#include "timing.h"

namespace xcargo::loader {

std::string Connections::admit(const std::string& host, bool required) const {
  const std::string prefix = host + ":";
  size_t all = 0, waiting = 0, total = 0, total_waiting = 0;
  for (const auto& [ep, c] : clients_) {
    if (c.probe) continue;
    const bool still = !c.session.authenticated && !c.doomed;  // doomed: closed at the next sweep
    ++total, total_waiting += still;
    if (c.peer.compare(0, prefix.size(), prefix) == 0) ++all, waiting += still;
  }
  if (all >= kMaxConnectionsPerHost) return "it has " + std::to_string(all) + " connections open, the node's limit per host";
  if (required && waiting >= kMaxUnauthenticatedPerHost)
    return std::to_string(waiting) + " of its connections have not authenticated yet";
  if (total >= kMaxConnections) return "the node has " + std::to_string(total) + " connections open, its limit";
  if (required && total_waiting >= kMaxUnauthenticated)
    return std::to_string(total_waiting) + " connections from all hosts have not authenticated yet, the node's limit";
  return {};
}

std::string Connections::make_room(const std::string& host, bool required, Clock::time_point now) {
  if (!required) return {};
  const std::string prefix = host + ":";
  size_t waiting = 0, total_waiting = 0;
  Client *oldest_here = nullptr, *oldest = nullptr;
  for (auto& [ep, c] : clients_) {
    if (c.probe || c.doomed || c.session.authenticated) continue;
    ++total_waiting;
    if (!oldest || c.since < oldest->since) oldest = &c;
    if (c.peer.compare(0, prefix.size(), prefix) == 0) {
      ++waiting;
      if (!oldest_here || c.since < oldest_here->since) oldest_here = &c;
    }
  }
  Client* out = waiting >= kMaxUnauthenticatedPerHost ? oldest_here : total_waiting >= kMaxUnauthenticated ? oldest : nullptr;
  if (!out) return {};
  doom(*out, now - timing::kRefusalLinger);  // nothing to tell it: closed at the next sweep
  return out->peer;
}

Client& Connections::add(Ep ep, std::string peer, Clock::time_point now) {
  Client& c = clients_[ep] = Client{};
  c.serial = next_serial_++;
  c.peer = std::move(peer);
  c.origin = std::make_shared<const std::string>("from " + c.peer);
  c.since = now;
  return c;
}

Client* Connections::find(Ep ep) {
  return const_cast<Client*>(std::as_const(*this).find(ep));
}

const Client* Connections::find(Ep ep) const {
  if (ep && ep == found_ep_) return found_;
  auto it = clients_.find(ep);
  if (it == clients_.end()) return nullptr;
  found_ep_ = ep;
  found_ = const_cast<Client*>(&it->second);
  return found_;
}

Connections::Ep Connections::live(Ep ep, uint64_t serial) const {
  const Client* c = find(ep);
  return c && c->serial == serial ? ep : nullptr;
}

void Connections::authenticated(Client& c) {
  if (c.session.who.empty()) return;
  auto& u = key_usage_[c.session.who];
  if (!u) u = std::make_shared<Usage>();
  c.key_usage = u;
}

size_t Connections::connections_of(const std::string& who) const {
  size_t n = 0;
  for (const auto& [ep, c] : clients_) n += c.session.authenticated && c.session.who == who;
  return n;
}

void Connections::doom(Client& c, Clock::time_point now) {
  c.doomed = true;
  c.since = now;
}

bool Connections::refused(Client& c, Clock::time_point now, bool* closing) {
  const unsigned n = ++c.refusals;
  *closing = false;
  if (!c.session.authenticated && n >= kMaxRefusals && !c.doomed) {
    doom(c, now);
    *closing = true;
  }
  return n <= kLoggedRefusals;
}

std::vector<Connections::Ep> Connections::sweep(Clock::time_point now, bool required, std::chrono::milliseconds deadline,
                                                std::vector<std::string>* late) {
  std::vector<Ep> closing;
  for (auto it = clients_.begin(); it != clients_.end();) {
    Client& c = it->second;
    const bool too_late = required && !c.session.authenticated && !c.probe && now - c.since > deadline;
    if (!c.doomed && !too_late) {
      ++it;
      continue;
    }
    if (c.doomed && now - c.since < timing::kRefusalLinger) {
      ++it;
      continue;
    }
    if (!c.doomed && late) late->push_back(c.peer);
    closing.push_back(it->first);
    forget_found();
    it = clients_.erase(it);
  }
  return closing;
}

}  // namespace xcargo::loader
