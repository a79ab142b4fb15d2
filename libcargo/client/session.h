// The protocol's client half (connection.cpp), which every transport of the client library
// derives from: the public Connection's calls, over the roundtrip, pipelining and lane hooks a
// transport implements. Internal to libcargo/client.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "wire/wire.h"
#include "xcargo/client.h"

namespace xcargo::client {

class Session : public Connection {
public:
  Result<wire::PushReply> push(ByteView cargo) final;
  Result<bool> has(const Digest& digest) final;
  Result<InvokeReply> invoke(const Digest& digest, std::string_view entry, ByteView input) final;
  Status invoke(const Digest& digest, std::string_view entry, ByteView input, InvokeReply& reply) final;
  Status invoke_pipelined(size_t count, const std::function<Invocation(size_t)>& call, size_t window,
                          const InvokeDone& done) final;
  Result<wire::Listing> list() final;
  Result<RemoteRegion> region(const std::string& name) final;
  Status get(const RemoteRegion& region, uint64_t offset, void* out, size_t len) final;
  bool one_sided(const RemoteRegion& region) const final { return !region.rkey.empty() && can_get_one_sided(); }
  Result<std::vector<wire::Counter>> stats() final;

protected:
  // Sends one request and returns the node's one reply to it.
  virtual Result<wire::Frame> roundtrip(wire::MsgType type, ByteView header, ByteView data) = 0;
  // Pipelining, for transports that can (pipelines()): send_request sends a request without
  // waiting (header, sealed, is copied if it cannot leave at once; data must stay valid until
  // its reply), and next_reply returns the reply to any request so sent, as it arrives.
  virtual Status send_request(wire::MsgType type, ByteView header, ByteView data);
  virtual Result<wire::Frame> next_reply();
  // The same into f, whose buffers a transport may reuse (the pipelined loop keeps one).
  virtual Status next_reply_into(wire::Frame& f);
  // The version handshake, then authentication with identity (null: none; identity_path
  // names it in messages) when the node asks for it or accepts it; implementations call it
  // once connected.
  Status handshake(const SigningKey* identity, const std::string& identity_path);
  // A shared-memory lane (wire-protocol.md section 8), for transports that can use one:
  // whether to ask the node for one after the handshake, and its offer (which the transport
  // may find it cannot use: then its requests go the usual way).
  virtual bool wants_lane() const { return false; }
  virtual void take_lane(const wire::LaneOffer&) {}
  Bytes sealed(ByteView header) const;  // header, then the session's token once authenticated
  Bytes sealed(Bytes&& header) const;   // the same, appended in place
  // The last invocation's reply header, its buffer kept for the next reply's (no allocation),
  // and the caller's last output buffer (invoke into a reply), kept if small for the next
  // reply's data.
  Bytes spare_header_, spare_data_;
  // A new connection to the same node, handshake included, for a request the node answered
  // `restarting` (it was replacing its worker): retried while the connection is refused,
  // for ConnectOptions::retry_ms. Transports that cannot reconnect fail (the default).
  virtual Status reconnect();
  // The connection was lost after its last reply, before the next request was sent: that
  // request can go to a new connection (reconnect) at no risk of running twice.
  virtual bool lost_before_sending() const { return false; }
  // After the connection failed: the ids of requests the node marked as never read (a lane
  // whose worker ended, wire-protocol.md 8.4): they did not run and may go to a new
  // connection. Empty for transports without lanes, or when the node did not say so.
  virtual std::vector<uint64_t> never_read() const { return {}; }
  // One-sided reads, for transports that offer them.
  virtual bool can_get_one_sided() const { return false; }
  virtual Status get_one_sided(const RemoteRegion& region, uint64_t offset, void* out, size_t len);
  // Where nodes send the results of computations that a kernel forwarded away from the node
  // this connection talks to (sent in the hello); empty if the transport has none.
  virtual Bytes reply_address() const { return {}; }
  // The node key the transport itself proved (TLS), which hello_reply must name before this
  // client signs its proof for that key; null for a transport that proves none.
  virtual const wire::RawKey* proven_node_key() const { return nullptr; }
  // For a transport's wait for a reply, when nothing arrived: once a cancel is asked for
  // (cancel_invoke, interrupt_now) while an invoke awaits its reply, the `cancel` message's
  // header (sealed; valid until the next invoke) for the transport to send; else nothing.
  std::optional<ByteView> cancel_due();

private:
  uint32_t invoke_flags() const { return kernel_log_ ? wire::kInvokeLog : 0; }
  // Sends a request and returns its reply; one answered `restarting` is sent again on a new
  // connection, up to kResends times (it did not run: wire-protocol.md section 5.1).
  Result<wire::Frame> request(wire::MsgType type, wire::MsgType reply_type, ByteView header, ByteView data);
  static constexpr int kResends = 5;
  Status greet(const SigningKey* identity, const std::string& identity_path);  // hello, then auth
  Status authenticate(const SigningKey& key, const std::string& identity_path, const wire::Nonce& client_nonce);
  Error denied(const std::string& why) const;  // the node refused a request: Errc::unauthenticated
  // The last invocation's header, encoded into again (no allocation); the next one of the
  // same cargo, entry and input size differs only in its request id, which leads it
  // (wire-protocol.md 4.6), and in a sealed one (sealed()), in the same session.
  struct InvokeHeader {
    Bytes bytes;
    Digest digest{};
    std::string entry;
    uint64_t input_size = 0, session = 0;
    uint32_t timeout_ms = 0, flags = 0;
    // The header of invocation id, sealed or not: the last one's with its id written in when
    // only that differs.
    ByteView make(const Session& c, bool seal, uint64_t id, const Digest& digest, std::string_view entry, uint64_t input_size);
  };
  InvokeHeader request_header_;  // invoke's, unsealed: request() seals it
  uint64_t awaited_invoke_ = 0;                // the invoke whose reply invoke() waits for; 0: none
  bool cancel_sent_ = false;                   // for awaited_invoke_
  Bytes cancel_header_;
  // An invoke's result frame to request id, into r: its strings take the reply's (no
  // allocation), and its output buffer and f's data trade places.
  Status decode_invoke_reply(wire::Frame& f, uint64_t id, InvokeReply& r) const;
  // The same into out (a reply, or an error to be replaced by one).
  void invoke_reply(wire::Frame& f, uint64_t id, Result<InvokeReply>& out) const;
  // Request ids start at a random value per connection: a result that someone else had a
  // node deliver to this client's address cannot name a request it is waiting for.
  static uint64_t first_request_id();
  uint64_t next_id_ = first_request_id();
  std::optional<wire::SessionToken> token_;  // once authenticated: ends every request's header
  Bytes sealed_;  // the request being sent, sealed (its buffer reused)
  uint64_t session_ = 0;  // handshakes so far: a reconnect starts a new session
};

}  // namespace xcargo::client
