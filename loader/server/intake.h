// The rules every message from a client connection meets before it may run (loader/SECURITY.md,
// "Clients"; loader/README.md, "Requests in flight"): a refused connection's messages
// dropped, the session token checked, hello and auth answered, the key's verbs checked, and
// requests past the limits in flight refused. Transport-free: the server around it says how
// a reply is sent (IntakeHost), so tests drive it with a fake one.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "server/auth_gate.h"
#include "server/connections.h"
#include "server/in_flight.h"
#include "server/line_limit.h"
#include "server/reply.h"
#include "wire/wire.h"

namespace xcargo::loader {

// What Intake needs from the server it sits in.
class IntakeHost {
public:
  virtual ~IntakeHost() = default;
  // Sends r on connection ep (a reply, or a refusal).
  virtual void send(Connections::Ep ep, Reply&& r) = 0;
  // The handler's answer to a hello whose header decoded (its limits, its version check).
  virtual Reply hello_reply(ByteView header) = 0;
  // A bad_request result for a message that could not be decoded.
  virtual Reply bad_request(const std::string& why) = 0;
  // Whether a hello is the worker's own probe's (SelfProbe::is_probe).
  virtual bool is_probe(const wire::Hello&) const { return false; }
  // The probe greeted on connection c.
  virtual void probe_greeted(Client&) {}
  // Writes out what was logged so far: who authenticated is on record before anything it
  // sends runs.
  virtual void flush_log() {}
};

class Intake {
public:
  using Log = std::function<void(std::string_view)>;
  // largest_request: the largest request data the node accepts (max-cargo, max-input);
  // largest: that or the largest reply, the unit of the byte limits in flight (in_flight.h).
  Intake(Connections& eps, const AuthGate& gate, IntakeHost& host, Log log, uint64_t largest_request, uint64_t largest)
      : eps_(eps), gate_(gate), host_(host), log_(std::move(log)), largest_request_(largest_request), largest_(largest) {}

  // The first look at a message of `type` on connection ep (client: its entry, null for a
  // message without a connection, a forward). True: a request its sender may make, to be
  // served; *header is then its header without the session token. False: it was answered
  // or dropped here (a refused connection's, one without its token, hello, auth, a request
  // the key may not make). Leader only, as everything here.
  bool screen(wire::MsgType type, Connections::Ep ep, Client* client, ByteView* header);

  // A request about to wait in the queue (not run inline): its share of its connection's and
  // key's limits in flight in *charge (length: its data's), or false after it was answered
  // `limit` at once. Forwards from peer nodes and messages without a connection take none.
  bool admit(wire::MsgType type, Connections::Ep ep, Client* client, ByteView header, uint64_t length,
             std::optional<Charge>* charge);

private:
  bool probe_hello(Client& c, ByteView header);
  void greet(Connections::Ep ep, Client& c, ByteView header);
  void authenticate(Connections::Ep ep, Client& c, ByteView header);
  void deny(Connections::Ep ep, Client* c, wire::MsgType type, ByteView header);
  void refuse_limit(Connections::Ep ep, Client& c, wire::MsgType type, ByteView header, const std::string& why);

  Connections& eps_;
  const AuthGate& gate_;
  IntakeHost& host_;
  Log log_;
  const uint64_t largest_request_, largest_;
  Tally unsealed_;  // messages on authenticated connections without their token
  Tally limited_;   // requests refused for a connection's or a key's requests in flight
  Tally strangers_; // requests on an endpoint that is no connection (a peer nobody accepted)
};

// The request id a reply to this request carries (0: none, or a hello).
inline uint64_t request_id_of(wire::MsgType type, ByteView header) {
  return wire::leading_request_id(type, header).value_or(0);
}

// An invoke's own kernel limit in ns (its timeout_ms, read before the header is decoded: a
// header too short for it has none), 0 for none and for other requests.
inline int64_t requested_limit_ns(wire::MsgType type, ByteView header) {
  if (type != wire::MsgType::invoke || header.size() < wire::kInvokeTimeoutOffset + 4) return 0;
  const uint8_t* p = header.data() + wire::kInvokeTimeoutOffset;  // little-endian u32
  return int64_t(uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24) * 1000000;
}

}  // namespace xcargo::loader
