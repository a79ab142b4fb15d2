// This node's connections to the other loaders of its cluster, which carry forwards: each
// greets the peer, checks the peer's signature over both nonces, proves this node's key, and
// only then carries forwards (each ending with the session's token). What waits for a peer
// fails when the peer goes away, refuses this node or does not answer in time. A peer on this
// host offers a shared-memory lane (wire-protocol.md 8), which then carries the forwards of
// cargos the peer is known to hold. The transport is behind PeerLink, so the handshake is
// unit-tested without UCX.
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <string_view>

#include "server/endpoint.h"
#include "keys/node_key.h"
#include "server/reply.h"
#include "xcargo/cluster.h"
#include "xcargo/identity.h"
#include "wire/lane.h"
#include "wire/wire.h"

namespace xcargo::loader {

// What Peers needs of the transport.
class PeerLink {
public:
  using Failed = std::function<void(const std::string& why)>;
  virtual ~PeerLink() = default;
  // A connection to a node's address (UCX's HOST:PORT, or tls://HOST:PORT), made in the
  // background; null (with *why) if it cannot be started.
  virtual Ep connect(const std::string& address, std::string* why) = 0;
  // A connection that comes later, through Peers::dialed or Peers::dial_failed (a peer's
  // same-host door, which the supervisor opens for this worker): the dial's number, or 0 if
  // this address is reached with connect().
  virtual uint64_t dial(const std::string& /*address*/) { return 0; }
  // Sends r on ep, asking the peer to answer on this endpoint; on_fail if it cannot be
  // delivered (the peer went away).
  virtual void send(Ep ep, Reply&& r, Failed on_fail) = 0;
  virtual void close(Ep ep) = 0;
};

// The writer's end of a peer's lane, attached by this node (detached with its Peer).
class PeerLane {
public:
  PeerLane() = default;
  PeerLane(wire::lane::Segment s, int shm_id) : seg_(s), id_(shm_id) {}
  PeerLane(PeerLane&& o) noexcept { *this = std::move(o); }
  PeerLane& operator=(PeerLane&& o) noexcept;
  ~PeerLane() { wire::lane::detach(seg_); }
  explicit operator bool() const { return bool(seg_); }
  // Writes a message if it fits a slot and one is free (else false: it goes through UCX).
  // *kick: the peer's worker may be asleep, and a kick through UCX wakes it.
  bool write(wire::MsgType type, ByteView header, ByteView data, bool* kick);
  uint64_t written() const { return sent_; }
  uint64_t taken_now() const { return seg_.requests().taken_now(); }
  // Whether the peer's worker still has the segment attached (a system call).
  bool reader_attached() const;

private:
  wire::lane::Segment seg_;
  int id_ = -1;
  uint64_t sent_ = 0, taken_ = 0;  // requests written; the peer's count of those taken, as last read
};

struct Peer {
  Ep ep;
  std::set<Digest> sent;  // cargos this node has sent it on this connection
  // Cargos it forwarded to this node, so it has them loaded: their forwards to it need no
  // cargo, and may take its lane (a forward of a cargo still on its way to it may not: the
  // lane could overtake the cargo).
  std::set<Digest> holds;
  enum LaneState { no_lane, lane_asked, lane_open } lane_state = no_lane;
  PeerLane lane;
  // Forwards written into the lane and maybe not taken yet: if the peer goes away, they fail
  // as a UCX send would. uint64_t: the message's index in the lane.
  std::deque<std::pair<uint64_t, PeerLink::Failed>> in_lane;
  uint64_t taken_at_sweep = 0;
  enum State { dialing, greeting, proving, ready } state = greeting;
  uint64_t dial = 0;           // while dialing: PeerLink::dial's number
  wire::Nonce nonce{};         // this node's challenge in its hello
  // Random request ids of this node's auth and lane requests: their answers must carry them.
  // Anyone who reaches this node's worker can send it an auth_reply or a lane_reply, and a
  // node id is public (a forged lane_reply naming one would make this node write its forwards
  // into the forger's lane, where they are lost; guarded by peers_test.cpp, "a lane that is
  // not the peer's, or that its worker left, carries nothing").
  uint64_t auth_id = 0, lane_id = 0;
  bool bad_hello_logged = false;
  wire::SessionToken token{};  // from the peer's auth_reply: ends every forward's header
  std::chrono::steady_clock::time_point since;
  struct Waiting {
    Reply message;
    PeerLink::Failed on_fail;
  };
  std::deque<Waiting> waiting;  // forwards sent once this node has authenticated
};

class Peers {
public:
  using Log = std::function<void(std::string_view)>;
  // lane_to: whether to ask the peer at an address for a shared-memory lane (one on this
  // host); none: never.
  using LaneTo = std::function<bool(const std::string& address)>;
  // peer_key: whether a node key a peer proved is one of the cluster's (AuthGate::is_peer_key);
  // none: any key that signs its proof (whoever answers at a node's address could).
  using PeerKey = std::function<bool(const wire::RawKey&)>;
  Peers(const Cluster& cluster, const keys::NodeKey& node_key, PeerLink& link, Log log, LaneTo lane_to = {}, PeerKey peer_key = {})
      : cluster_(cluster), key_(node_key), link_(link), log_(std::move(log)), lane_to_(std::move(lane_to)),
        peer_key_(std::move(peer_key)) {}

  // Node id's connection, made (and greeted) on first use; null (with *why) if id is not in
  // the cluster or cannot be reached.
  Peer* get(uint32_t id, std::string* why);
  // A forward to p: now if this node has authenticated to it, else once it has. by_lane:
  // through p's lane if it has one and the message fits (a cargo p holds, see Peer::holds).
  void send(Peer& p, Reply&& r, PeerLink::Failed on_fail, bool by_lane = false);
  // Node id forwarded the cargo digest to this node, so it holds it.
  void holds(uint32_t id, const Digest& digest);
  // A send to node id on ep failed: the next forward connects again (and sends the cargo
  // again). True if ep was that node's current connection (the caller closes it once UCX
  // reports the error).
  bool forget(uint32_t id, Ep ep);

  // Answers to this node's hello (by node id; its signature proves it) and auth (by its
  // random request id). A hello_reply without a valid signature is ignored (it may be
  // anyone's): a peer that never proves its key is dropped by sweep(). Each returns false
  // for an answer to nothing this node asked (the caller counts those).
  bool on_hello_reply(const wire::HelloReply& r);
  bool on_auth_reply(const wire::AuthReply& r);
  // The answer to this node's lane request (by its random request id).
  bool on_lane_offer(const wire::LaneOffer& r);
  // A dial (PeerLink::dial) made its connection: the peer is greeted on it. False if no
  // peer waits for that dial any more (dropped meanwhile): the caller closes ep.
  bool dialed(uint64_t dial, Ep ep);
  // A dial failed: what waited for that peer fails.
  void dial_failed(uint64_t dial, const std::string& why);
  // ep went away (its transport closes it): true if it was a peer's.
  bool lost(Ep ep);
  // Peers that did not complete the handshake within deadline are dropped, and so are those
  // whose worker left their lane with forwards in it (seen on two sweeps in a row).
  void sweep(std::chrono::steady_clock::time_point now, std::chrono::milliseconds deadline);

  const std::map<uint32_t, Peer>& all() const { return peers_; }
  void clear() { peers_.clear(); }

private:
  void greet(Peer& p);  // its hello, on its connection
  // What waited for it fails with why; its endpoint is closed unless UCX already lost it.
  void drop(std::map<uint32_t, Peer>::iterator it, const std::string& why, bool close);

  const Cluster& cluster_;
  const keys::NodeKey& key_;
  PeerLink& link_;
  Log log_;
  LaneTo lane_to_;
  PeerKey peer_key_;
  std::map<uint32_t, Peer> peers_;
};

}  // namespace xcargo::loader
