// A hand-driven UCX connection to a loader, for the attack tools in tests/tools: raw wire
// messages one at a time, no client library, so that a tool can send what no client would.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "net/door.h"
#include "net/ucx.h"
#include "xcargo/identity.h"
#include "wire/wire.h"

namespace xcargo::test {

class RawClient {
public:
  // Connects to HOST:PORT (rma: this side's context offers one-sided access): through the
  // same-host door of a loader of this user on this host (`route` first, then its `door`
  // message), else its UCX listener; dies with the tool's name on failure.
  RawClient(const char* tool, const std::string& to, bool rma = false, const door::Route& route = {});
  // Whether a connection to `to` tries the same-host door first (a loopback address, with
  // System V shared memory allowed by UCX_TLS).
  static bool door_route(const std::string& to);
  ~RawClient();

  // Sends a request (UCX's reply flag set; its header sealed() once authenticated) and waits
  // up to `seconds` for an answer of any type, on this connection or on another one to this
  // worker; false if none came.
  bool ask(wire::MsgType type, const Bytes& header, ByteView data = {}, int seconds = 10);
  const Bytes& answer() const { return answer_; }
  // header with this connection's session token appended, once a proof was accepted.
  Bytes sealed(const Bytes& header) const;
  // Sends a message of any type as it is (never sealed) without waiting, with or without
  // UCX's reply flag.
  void send(uint16_t type, const Bytes& header, bool reply_flag);
  // The same, but never progresses this client's UCX worker (nothing it was sent is read):
  // a message that cannot leave at once stays queued.
  void send_blind(uint16_t type, const Bytes& header);
  // After send(): whether an answer came within `seconds`.
  bool wait_answer(int seconds);
  // Whether the node closed the connection (UCX reported it, or the door's lifeline ended).
  bool lost() const;

  // hello with a fresh nonce; hello_reply() is the node's answer. max_version below 3 sends
  // an old hello (no nonce). reply_address: the UCX address the hello names for forwarded
  // results (default: this client's own worker).
  void greet(uint16_t max_version = wire::kVersion, const Bytes& reply_address = {});
  const wire::HelloReply& hello_reply() const { return hello_; }
  // key's proof for this connection, and the node's verdict on a proof ("ok", or
  // "unauthenticated: why", or what went wrong).
  wire::Auth proof(const SigningKey& key) const;
  std::string prove(const wire::Auth& a, int seconds = 10);

  net::UcxWorker& worker() { return *w_; }
  ucp_ep_h ep() const { return ep_; }

private:
  const char* tool_;
  std::unique_ptr<net::UcxWorker> w_;
  ucp_ep_h ep_ = nullptr;
  int lifeline_ = -1;  // the same-host door's connection, when the endpoint came through it
  door::Ticket ticket_{};
  Bytes answer_;
  bool have_ = false, lost_ = false;
  wire::HelloReply hello_;
  wire::Nonce nonce_{};
  std::optional<wire::SessionToken> token_;
};

}  // namespace xcargo::test
