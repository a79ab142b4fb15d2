// The worker's accepted connections: who each is (its authentication session), what it has
// in flight, and when it is closed (refused, not authenticated in time). Only the leader
// touches it. Transport-free: UCX endpoints are only keys here.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "server/auth_gate.h"
#include "server/endpoint.h"
#include "server/in_flight.h"
#include "xcargo/types.h"

namespace xcargo::loader {

class Lane;

// Connections from one host still to authenticate: past this, each new one takes the place
// of the oldest (make_room), so that one host cannot crowd others out.
inline constexpr size_t kMaxUnauthenticatedPerHost = 128;
// Connections from one host in all, authenticated or not (the worker's own probe aside).
inline constexpr size_t kMaxConnectionsPerHost = 1024;
// The same from all hosts: many addresses (an IPv6 prefix, say) cannot take the worker past
// its descriptors (20000) or fill its memory with handshakes (about 50 KB each).
inline constexpr size_t kMaxUnauthenticated = 1024;
inline constexpr size_t kMaxConnections = 8192;
// Authenticated connections of one key, from all hosts.
inline constexpr size_t kMaxConnectionsPerKey = 1024;
// Refused requests logged per connection, and refused requests before authenticating after
// which the connection is closed.
inline constexpr unsigned kLoggedRefusals = 3;
inline constexpr unsigned kMaxRefusals = 8;

struct Client {
  Bytes address;                     // its relay address (forwarded results: wire-protocol.md 4.13), once made
  uint64_t relay = 0;                // that address's relay id
  uint64_t serial = 0;               // tells this connection from a later one on the same endpoint
  std::string peer;                  // HOST:PORT it connected from, for log lines
  std::shared_ptr<const std::string> origin;  // "from PEER[ key KEYID (NAME)]": its requests' log lines (RequestOrigin)
  std::chrono::steady_clock::time_point since;  // when it connected (or was refused)
  AuthGate::Session session;
  bool doomed = false;               // refused: closed at a sweep, after kRefusalLinger
  bool probe = false;                // the worker's own SelfProbe: never authenticates, not logged
  bool closing = false;              // its client does not read its replies: closed at the next sweep
  std::shared_ptr<Usage> usage = std::make_shared<Usage>();  // its requests in flight
  std::shared_ptr<Usage> key_usage;  // its key's, once authenticated with one
  unsigned refusals = 0;             // requests refused on this connection
  std::shared_ptr<Lane> lane;        // its shared-memory lane, if it asked for one (lane.h)
};

class Connections {
public:
  using Clock = std::chrono::steady_clock;
  using Ep = loader::Ep;

  // Why a new connection from host (the HOST of HOST:PORT) is refused (kMaxConnectionsPerHost; when authentication
  // is required, kMaxUnauthenticatedPerHost); empty if it is accepted.
  std::string admit(const std::string& host, bool required) const;
  // When authentication is required and host's connections still to authenticate (or all
  // hosts') are at their limit: dooms the oldest of them, closed at the next sweep, so that a
  // new one may try. A flood of connections that never authenticate then only shortens how
  // long each may take, instead of shutting every newcomer out (the other users of a host
  // share its loopback address). Returns the peer it doomed ("" if none).
  std::string make_room(const std::string& host, bool required, Clock::time_point now);
  // A new connection (replacing any old one on the same endpoint).
  Client& add(Ep ep, std::string peer, Clock::time_point now);
  Client* find(Ep ep);
  const Client* find(Ep ep) const;
  bool erase(Ep ep) {
    forget_found();
    return clients_.erase(ep) > 0;
  }
  // ep if it is still the connection `serial` named; else null.
  Ep live(Ep ep, uint64_t serial) const;

  // c has authenticated: its requests also count against its key's usage, shared by all
  // connections of that key.
  void authenticated(Client& c);
  // Authenticated connections whose session is `who` ("key KEYID (NAME)").
  size_t connections_of(const std::string& who) const;
  // Refuses c (it will be closed after kRefusalLinger).
  static void doom(Client& c, Clock::time_point now);
  // Counts a refused request of c. Whether to log it; the connection is doomed once it
  // has made kMaxRefusals requests before authenticating (*closing says so the first time).
  bool refused(Client& c, Clock::time_point now, bool* closing);

  // The connections to close now: doomed ones once their refusal had time to arrive, and,
  // when authentication is required, those that did not authenticate within deadline
  // (named in *late, for the log). They are removed from the table.
  std::vector<Ep> sweep(Clock::time_point now, bool required, std::chrono::milliseconds deadline,
                        std::vector<std::string>* late);

  const std::map<Ep, Client>& all() const { return clients_; }
  void clear() {
    forget_found();
    clients_.clear();
  }

private:
  void forget_found() const { found_ep_ = nullptr, found_ = nullptr; }
  std::map<Ep, Client> clients_;
  // The last connection found: a request's connection is looked up by each step of its way
  // (lane, intake, run, reply), four tree searches, about a tenth of a quick invocation's
  // time in a worker. A node's address stays until it is erased.
  mutable Ep found_ep_ = nullptr;
  mutable Client* found_ = nullptr;
  std::map<std::string, std::shared_ptr<Usage>> key_usage_;  // by the key's log name (session.who)
  uint64_t next_serial_ = 1;
};

}  // namespace xcargo::loader
