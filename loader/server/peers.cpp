// Peers: connections to cluster peers, authenticated with node keys before they carry forwards.
#include "server/peers.h"

#include <sys/ipc.h>
#include <sys/shm.h>

#include <algorithm>
#include <cstring>

#include "auth/auth.h"
#include "common/large_buffers.h"

namespace xcargo::loader {

using namespace wire;

namespace {
constexpr size_t kMaxHolds = 1024;  // digests remembered per peer (past it, forgotten and learnt again)

uint64_t id_of(const Nonce& n) {
  uint64_t id;
  std::memcpy(&id, n.data(), sizeof id);
  return id;
}
}  // namespace

PeerLane& PeerLane::operator=(PeerLane&& o) noexcept {
  if (this != &o) {
    lane::detach(seg_);
    seg_ = std::exchange(o.seg_, {});
    id_ = o.id_;
    sent_ = o.sent_;
    taken_ = o.taken_;
  }
  return *this;
}

bool PeerLane::write(MsgType type, ByteView header, ByteView data, bool* kick) {
  if (!seg_ || !lane::fits(header, data)) return false;
  const lane::Ring r = seg_.requests();
  if (!r.has_room(sent_, &taken_)) return false;
  r.write(sent_++, type, header, data);
  lane::fence();
  *kick = seg_.worker_idle();
  return true;
}

Peer* Peers::get(uint32_t id, std::string* why) {
  if (auto it = peers_.find(id); it != peers_.end()) return &it->second;
  const ClusterNode* node = cluster_.find(id);
  if (!node) return *why = "it is not in the cluster", nullptr;
  const uint64_t dial = link_.dial(node->address);
  Ep ep;
  if (!dial) {
    std::string error;
    ep = link_.connect(node->address, &error);
    if (!ep) {
      log_("cannot reach node " + std::to_string(id) + ": " + error);
      return *why = "it could not be reached", nullptr;
    }
  }
  auto nonce = auth::random_nonce();
  auto ids = nonce.ok() ? auth::random_nonce() : nonce;
  if (!ids.ok()) {
    log_("cannot greet node " + std::to_string(id) + ": " + ids.error().message());
    if (ep) link_.close(ep);
    return *why = "it could not be greeted", nullptr;
  }
  Peer& p = peers_[id] = Peer{};
  p.ep = ep;
  p.nonce = *nonce;
  p.auth_id = id_of(*ids);
  p.lane_id = id_of(*ids) ^ 1;
  p.since = std::chrono::steady_clock::now();
  p.dial = dial;
  p.state = dial ? Peer::dialing : Peer::greeting;
  if (!dial) greet(p);
  return &p;
}

void Peers::greet(Peer& p) {
  link_.send(p.ep, {MsgType::hello, encode(Hello{kVersion, kVersion, {}, p.nonce}), {}}, {});
}

bool Peers::dialed(uint64_t dial, Ep ep) {
  for (auto& [id, p] : peers_)
    if (p.state == Peer::dialing && p.dial == dial) {
      p.ep = ep;
      p.state = Peer::greeting;
      greet(p);
      return true;
    }
  return false;
}

void Peers::dial_failed(uint64_t dial, const std::string& why) {
  for (auto it = peers_.begin(); it != peers_.end(); ++it)
    if (it->second.state == Peer::dialing && it->second.dial == dial) {
      log_("cannot reach node " + std::to_string(it->first) + ": " + why);
      return drop(it, "it could not be reached", false);
    }
}

void Peers::send(Peer& p, Reply&& r, PeerLink::Failed on_fail, bool by_lane) {
  if (p.state != Peer::ready) return p.waiting.push_back({std::move(r), std::move(on_fail)});
  r.header.insert(r.header.end(), p.token.begin(), p.token.end());  // the session's token ends every request
  bool kick = false;
  if (by_lane && p.lane && p.lane.write(r.type, r.header, r.data, &kick)) {
    if (kick) link_.send(p.ep, {MsgType::kick, Bytes(p.token.begin(), p.token.end()), {}}, {});
    if (p.in_lane.size() >= 2 * lane::kSlots) {  // forget those taken (at most kSlots are not)
      const uint64_t taken = p.lane.taken_now();
      while (!p.in_lane.empty() && p.in_lane.front().first < taken) p.in_lane.pop_front();
    }
    p.in_lane.emplace_back(p.lane.written() - 1, std::move(on_fail));
    give_spare(std::move(r.header));  // copied into the lane: the next message's (large_buffers.h)
    give_spare(std::move(r.data));
    return;
  }
  link_.send(p.ep, std::move(r), std::move(on_fail));
}

bool PeerLane::reader_attached() const {
  shmid_ds ds{};
  return ::shmctl(id_, IPC_STAT, &ds) == 0 && ds.shm_nattch >= 2;
}

void Peers::holds(uint32_t id, const Digest& digest) {
  auto it = peers_.find(id);
  if (it == peers_.end()) return;
  std::set<Digest>& h = it->second.holds;
  if (h.size() >= kMaxHolds && !h.count(digest)) h.clear();
  h.insert(digest);
}

bool Peers::forget(uint32_t id, Ep ep) {
  auto it = peers_.find(id);
  if (it == peers_.end() || !ep || it->second.ep != ep) return false;
  peers_.erase(it);
  return true;
}

void Peers::drop(std::map<uint32_t, Peer>::iterator it, const std::string& why, bool close) {
  std::deque<Peer::Waiting> waiting;
  waiting.swap(it->second.waiting);
  std::deque<std::pair<uint64_t, PeerLink::Failed>> in_lane;
  if (it->second.lane) {  // those its worker did not take
    const uint64_t taken = it->second.lane.taken_now();
    for (auto& l : it->second.in_lane)
      if (l.first >= taken) in_lane.push_back(std::move(l));
  }
  if (close && it->second.ep) link_.close(it->second.ep);
  peers_.erase(it);
  for (auto& w : waiting)
    if (w.on_fail) w.on_fail(why);
  for (auto& l : in_lane)
    if (l.second) l.second(why);
}

bool Peers::on_hello_reply(const HelloReply& r) {
  auto it = peers_.find(r.node_id);
  if (it == peers_.end() || it->second.state != Peer::greeting) return false;
  Peer& p = it->second;
  PublicKey theirs;
  theirs.raw = r.node_key;
  if (r.status != ReplyStatus::ok || !ed25519_verify(theirs, auth::node_proof(p.nonce, r.nonce, r.node_key), r.node_sig)) {
    if (!std::exchange(p.bad_hello_logged, true))
      log_("a hello_reply for node " + std::to_string(r.node_id) + " came without a valid signature (from the node, or from " +
           "anyone else); waiting for one that proves the node's key");
    return false;
  }
  if (peer_key_ && !peer_key_(r.node_key)) {  // it holds that key: whoever listens at the node's address
    log_("node " + std::to_string(r.node_id) + " answered with node key " + to_hex(key_id_of(r.node_key)) +
         ", which this node's authorized keys do not list with the verb forward; not forwarding to it");
    return drop(it, "its node key is not one of the cluster's", true), true;
  }
  auto sig = key_.client_proof(p.nonce, r.nonce, r.node_key);
  if (!sig.ok()) return drop(it, "this node could not sign its proof: " + sig.error().message(), true), true;
  p.state = Peer::proving;
  link_.send(p.ep, {MsgType::auth, encode(Auth{p.auth_id, key_.public_key().raw, *sig}), {}}, {});
  return true;
}

bool Peers::on_auth_reply(const AuthReply& r) {
  auto it = std::find_if(peers_.begin(), peers_.end(),
                         [&](const auto& e) { return e.second.state == Peer::proving && e.second.auth_id == r.request_id; });
  if (it == peers_.end()) return false;
  if (r.status != ReplyStatus::ok || !(r.verbs & auth::kForward)) {
    log_("node " + std::to_string(it->first) + " does not accept forwards from this node's key " + to_hex(key_.public_key().id) +
         ": " + (r.status != ReplyStatus::ok ? r.message : "the key may " + auth::verbs_text(r.verbs)));
    return drop(it, "it does not accept forwards from this node's key", true), true;
  }
  Peer& p = it->second;
  p.state = Peer::ready;
  p.token = r.token;
  if (lane_to_ && p.lane_state == Peer::no_lane)
    if (const ClusterNode* node = cluster_.find(it->first); node && lane_to_(node->address)) {
      // A shared-memory lane (wire-protocol.md 8.1); forwards go through UCX until it is open.
      p.lane_state = Peer::lane_asked;
      Bytes h = encode(RequestOnly{p.lane_id});
      h.insert(h.end(), p.token.begin(), p.token.end());
      link_.send(p.ep, {MsgType::lane, std::move(h), {}}, {});
    }
  std::deque<Peer::Waiting> waiting;
  waiting.swap(p.waiting);
  for (auto& w : waiting) send(p, std::move(w.message), std::move(w.on_fail));
  return true;
}

bool Peers::on_lane_offer(const LaneOffer& r) {
  auto it = std::find_if(peers_.begin(), peers_.end(),
                         [&](const auto& e) { return e.second.lane_state == Peer::lane_asked && e.second.lane_id == r.request_id; });
  if (it == peers_.end()) return false;
  Peer& p = it->second;
  p.lane_state = Peer::no_lane;
  if (r.status != ReplyStatus::ok) return true;  // it has none to spare: UCX, as before
  lane::Segment seg = lane::attach(r.shm_id, r.nonce);
  if (!seg) {
    log_("node " + std::to_string(it->first) + " offered a shared-memory lane this node cannot attach (another user's, or " +
         "not on this host); forwards to it go through UCX");
    return true;
  }
  p.lane = PeerLane(seg, r.shm_id);
  p.lane_state = Peer::lane_open;
  return true;
}

bool Peers::lost(Ep ep) {
  if (!ep) return false;
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
      const bool dialing = it->second.state == Peer::dialing;
      log_("node " + std::to_string(it->first) + (dialing ? " was not reached" : " did not complete authentication") +
           " in time; not forwarding to it");
      drop(it, dialing ? "it could not be reached in time" : "it did not complete authentication in time", true);
    }
    else if (Peer& p = it->second; p.lane && !p.in_lane.empty()) {
      const uint64_t taken = p.lane.taken_now();
      while (!p.in_lane.empty() && p.in_lane.front().first < taken) p.in_lane.pop_front();
      // Forwards wait in its lane, and it took none since the last sweep: is its worker there?
      if (!p.in_lane.empty() && taken == p.taken_at_sweep && !p.lane.reader_attached()) {
        log_("node " + std::to_string(it->first) + " left its shared-memory lane with forwards in it; connecting again");
        drop(it, "it went away", true);
      } else {
        p.taken_at_sweep = taken;
      }
    }
    it = next;
  }
}

}  // namespace xcargo::loader
