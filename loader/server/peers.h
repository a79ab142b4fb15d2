// This node's connections to the other loaders of its cluster, which carry forwards: each
// greets the peer, checks the peer's signature over both nonces, proves this node's key, and
// only then carries forwards (each ending with the session's token). What waits for a peer
// fails when the peer goes away, refuses this node or does not answer in time. The transport
// is behind PeerLink, so the handshake is unit-tested without UCX.
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <string_view>

#include "reply.h"
#include "xcargo/cluster.h"
#include "xcargo/identity.h"
#include "xcargo/wire.h"

struct ucp_ep;

namespace xcargo::loader {

// What Peers needs of the transport.
class PeerLink {
public:
  using Failed = std::function<void(const std::string& why)>;
  virtual ~PeerLink() = default;
  // An endpoint to HOST:PORT, connecting in the background; null (with *why) if it cannot.
  virtual ucp_ep* connect(const std::string& address, std::string* why) = 0;
  // Sends r on ep, asking the peer to answer on this endpoint; on_fail if it cannot be
  // delivered (the peer went away).
  virtual void send(ucp_ep* ep, Reply&& r, Failed on_fail) = 0;
  virtual void close(ucp_ep* ep) = 0;
};

struct Peer {
  ucp_ep* ep = nullptr;
  std::set<Digest> sent;  // cargos this node has sent it on this connection
  enum State { greeting, proving, ready } state = greeting;
  wire::Nonce nonce{};         // this node's challenge in its hello
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
  Peers(const Cluster& cluster, const SigningKey& node_key, PeerLink& link, Log log)
      : cluster_(cluster), key_(node_key), link_(link), log_(std::move(log)) {}

  // Node id's connection, made (and greeted) on first use; null (with *why) if id is not in
  // the cluster or cannot be reached.
  Peer* get(uint32_t id, std::string* why);
  // A forward to p: now if this node has authenticated to it, else once it has.
  void send(Peer& p, Reply&& r, PeerLink::Failed on_fail);
  // A send to node id on ep failed: the next forward connects again (and sends the cargo
  // again). True if ep was that node's current connection (the caller closes it once UCX
  // reports the error).
  bool forget(uint32_t id, ucp_ep* ep);

  // Answers to this node's hello and auth (told apart by node id: the auth's request id).
  void on_hello_reply(const wire::HelloReply& r);
  void on_auth_reply(const wire::AuthReply& r);
  // ep went away (UCX's error callback, which closes it): true if it was a peer's.
  bool lost(ucp_ep* ep);
  // Peers that did not complete the handshake within deadline are dropped.
  void sweep(std::chrono::steady_clock::time_point now, std::chrono::milliseconds deadline);

  const std::map<uint32_t, Peer>& all() const { return peers_; }
  void clear() { peers_.clear(); }

private:
  // What waited for it fails with why; its endpoint is closed unless UCX already lost it.
  void drop(std::map<uint32_t, Peer>::iterator it, const std::string& why, bool close);

  const Cluster& cluster_;
  const SigningKey& key_;
  PeerLink& link_;
  Log log_;
  std::map<uint32_t, Peer> peers_;
};

}  // namespace xcargo::loader
