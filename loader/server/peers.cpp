// Peers: connections to cluster peers, authenticated with node keys before they carry forwards.
#include "peers.h"

#include "xcargo/auth.h"

namespace xcargo::loader {

using namespace wire;

Peer* Peers::get(uint32_t id, std::string* why) {
  if (auto it = peers_.find(id); it != peers_.end()) return &it->second;
  const ClusterNode* node = cluster_.find(id);
  if (!node) return *why = "it is not in the cluster", nullptr;
  std::string error;
  ucp_ep* ep = link_.connect(node->address, &error);
  if (!ep) {
    log_("cannot reach node " + std::to_string(id) + ": " + error);
    return *why = "it could not be reached", nullptr;
  }
  auto nonce = auth::random_nonce();
  if (!nonce.ok()) {
    log_("cannot greet node " + std::to_string(id) + ": " + nonce.error().message());
    link_.close(ep);
    return *why = "it could not be greeted", nullptr;
  }
  Peer& p = peers_[id] = Peer{};
  p.ep = ep;
  p.nonce = *nonce;
  p.since = std::chrono::steady_clock::now();
  link_.send(p.ep, {MsgType::hello, encode(Hello{kVersion, kVersion, {}, p.nonce}), {}}, {});
  return &p;
}

void Peers::send(Peer& p, Reply&& r, PeerLink::Failed on_fail) {
  if (p.state != Peer::ready) return p.waiting.push_back({std::move(r), std::move(on_fail)});
  r.header.insert(r.header.end(), p.token.begin(), p.token.end());  // the session's token ends every request
  link_.send(p.ep, std::move(r), std::move(on_fail));
}

bool Peers::forget(uint32_t id, ucp_ep* ep) {
  auto it = peers_.find(id);
  if (it == peers_.end() || it->second.ep != ep) return false;
  peers_.erase(it);
  return true;
}

void Peers::drop(std::map<uint32_t, Peer>::iterator it, const std::string& why, bool close) {
  std::deque<Peer::Waiting> waiting;
  waiting.swap(it->second.waiting);
  if (close) link_.close(it->second.ep);
  peers_.erase(it);
  for (auto& w : waiting)
    if (w.on_fail) w.on_fail(why);
}

void Peers::on_hello_reply(const HelloReply& r) {
  auto it = peers_.find(r.node_id);
  if (it == peers_.end() || it->second.state != Peer::greeting) return;
  Peer& p = it->second;
  PublicKey theirs;
  theirs.raw = r.node_key;
  if (r.status != ReplyStatus::ok || !ed25519_verify(theirs, auth::node_proof(p.nonce, r.nonce, r.node_key), r.node_sig)) {
    log_("node " + std::to_string(r.node_id) + " answered the hello without a valid signature; not forwarding to it");
    return drop(it, "it did not prove its node key", true);
  }
  auto sig = key_.sign(auth::client_proof(p.nonce, r.nonce, r.node_key, key_.public_key().raw));
  if (!sig.ok()) return drop(it, "this node could not sign its proof: " + sig.error().message(), true);
  p.state = Peer::proving;
  link_.send(p.ep, {MsgType::auth, encode(Auth{r.node_id, key_.public_key().raw, *sig}), {}}, {});
}

void Peers::on_auth_reply(const AuthReply& r) {
  auto it = peers_.find(uint32_t(r.request_id));
  if (r.request_id > UINT32_MAX || it == peers_.end() || it->second.state != Peer::proving) return;
  if (r.status != ReplyStatus::ok || !(r.verbs & auth::kForward)) {
    log_("node " + std::to_string(it->first) + " does not accept forwards from this node's key " + to_hex(key_.public_key().id) +
         ": " + (r.status != ReplyStatus::ok ? r.message : "the key may " + auth::verbs_text(r.verbs)));
    return drop(it, "it does not accept forwards from this node's key", true);
  }
  Peer& p = it->second;
  p.state = Peer::ready;
  p.token = r.token;
  std::deque<Peer::Waiting> waiting;
  waiting.swap(p.waiting);
  for (auto& w : waiting) send(p, std::move(w.message), std::move(w.on_fail));
}

bool Peers::lost(ucp_ep* ep) {
  for (auto it = peers_.begin(); it != peers_.end(); ++it)
    if (it->second.ep == ep) {
      drop(it, "the connection to it was lost", false);
      return true;
    }
  return false;
}

void Peers::sweep(std::chrono::steady_clock::time_point now, std::chrono::milliseconds deadline) {
  for (auto it = peers_.begin(); it != peers_.end();) {
    auto next = std::next(it);
    if (it->second.state != Peer::ready && now - it->second.since > deadline) {
      log_("node " + std::to_string(it->first) + " did not complete authentication in time; not forwarding to it");
      drop(it, "it did not complete authentication in time", true);
    }
    it = next;
  }
}

}  // namespace xcargo::loader
