// TLS 1.3 channels whose two ends are Ed25519 identities, with no certificate authority
// (format-spec/wire-protocol.md section 2.3). Each end shows a certificate chain made on the
// fly from its key, and the other end accepts it by the identity key the chain proves, against
// the keys it trusts (a loader: its clients file and its cluster's node keys; a client: the
// node key it expects). Until a handshake is done, OpenSSL is the only code that reads a byte
// of it; afterwards the wire protocol's frames (section 2.2) travel in its records.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "xcargo/error.h"
#include "xcargo/identity.h"
#include "xcargo/types.h"
#include "wire/wire.h"

namespace xcargo::tls {

// OpenSSL's check of the other end's chain (tls.cpp).
int verify_chain(void* store_ctx, void* arg);

using RawKey = std::array<uint8_t, 32>;

// A certificate (DER) of subject's key, signed by issuer: valid from an hour before now (for
// clocks a little apart) for `valid`. A self-signed one when subject is the issuer's own key.
Result<Bytes> certificate(const SigningKey& issuer, const RawKey& subject, std::chrono::seconds valid);

// What one end shows: the key its TLS handshake signs with, and its chain (DER, leaf first):
// either [key's certificate, self-signed] (an identity showing itself), or [key's certificate
// by an identity, the identity's self-signed one] (a key certified by an identity this
// process does not hold: a loader worker's ephemeral key, certified by its key service).
struct Credential {
  SigningKey key;
  std::vector<Bytes> chain;
  static Result<Credential> self_signed(const SigningKey& identity);
};

// Who the other end is: the identity its chain proves.
struct Peer {
  RawKey identity{};       // the self-signed key, or the key that certified the TLS key
  bool certified = false;  // the TLS key was certified by identity (a loader's worker)
};
// Whether to accept a peer; else *why says why not (the handshake fails with it).
using Accept = std::function<bool(const Peer&, std::string* why)>;

// The settings both ends of one kind share (an SSL_CTX): TLS 1.3 only, Ed25519 signatures,
// X25519 key exchange, no resumption (every connection proves its keys afresh), and the
// other end's chain checked by xcargo's rules (Channel::peer) instead of a CA's.
class Context {
public:
  enum Role { server, client };
  static Result<std::shared_ptr<Context>> create(Role role, const Credential& own, Accept accept);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  Role role() const { return role_; }

private:
  Context() = default;
  friend class Channel;
  friend int verify_chain(void*, void*);
  Role role_ = server;
  void* ctx_ = nullptr;  // SSL_CTX
  Accept accept_;
};

// Largest record of bytes read or written at once (TLS's own record limit).
inline constexpr size_t kRecord = 16384;

// One connection over a connected stream socket, which it owns. Blocking or not: on a
// non-blocking socket a step that must wait returns want_read or want_write (poll the fd for
// that, then call it again).
class Channel {
public:
  enum class Io { done, want_read, want_write, closed };
  static Result<std::unique_ptr<Channel>> start(std::shared_ptr<Context> context, int fd);
  ~Channel();
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  int fd() const { return fd_; }
  // One step of the handshake; done once both ends have proved their keys and this end
  // accepted the other's. An error when the peer was refused (Errc::unauthenticated, with
  // why) or broke the protocol (Errc::unreachable). In TLS 1.3 a client's handshake ends
  // before the server has judged its key: a refusal reaches the client at its first
  // receive (Errc::unauthenticated).
  [[nodiscard]] Result<Io> handshake();
  bool ready() const { return ready_; }
  // The handshake's error was the other end closing the connection (not a protocol error).
  bool closed_in_handshake() const { return closed_in_handshake_; }
  // A client's: the first bytes the other end sent during the handshake (at most
  // kFirstBytes), for a caller that recognizes what another protocol said in place of TLS
  // (a front door's refusal, net/door.h).
  ByteView first_bytes() const { return first_; }
  static constexpr size_t kFirstBytes = 1024;
  // The other end, once ready.
  const Peer& peer() const { return peer_; }

  // Queues one frame (wire-protocol.md 2.2) and sends what the socket takes now: its data
  // copied, taken over (send_owned: a large buffer goes back to the pool once sent, large_buffers.h),
  // or (send_view) left where it is, to stay valid until queued() says it has left.
  [[nodiscard]] Result<Io> send(wire::MsgType type, ByteView header, ByteView data);
  [[nodiscard]] Result<Io> send_owned(wire::MsgType type, ByteView header, Bytes&& data);
  [[nodiscard]] Result<Io> send_view(wire::MsgType type, ByteView header, ByteView data);
  // Sends what is queued; done when nothing is left. Frames queued one after another go out
  // together, up to a TLS record each (one encryption and one system call for many).
  [[nodiscard]] Result<Io> flush();
  size_t queued() const { return out_bytes_; }
  // Held, the send calls only queue (until kHoldLimit bytes wait), and the caller flushes
  // once it has sent what it had to send: a batch of frames leaves together.
  void hold(bool on) { held_ = on; }
  bool holding() const { return held_; }
  static constexpr size_t kHoldLimit = 256 * 1024;
  // Whether OpenSSL holds bytes read off the socket and not yet taken by receive().
  bool buffered() const;
  // The next whole frame into f (its buffers reused); want_read until one has arrived,
  // closed when the peer ended the stream between frames. A frame over the limits (a header
  // over kMaxHeader, data over max_data) is an error before anything is allocated for it.
  // Bytes OpenSSL has already read off the socket wait inside it: call this until it
  // returns want_read before waiting for the socket again.
  [[nodiscard]] Result<Io> receive(wire::Frame& f, uint64_t max_data);
  // The data length the frame being read declared (its head is in), 0 between frames.
  uint64_t receiving() const { return in_body_ ? data_len_ : 0; }
  // Bytes of frames received so far, in all: whether a receive() took any.
  uint64_t received() const { return received_; }
  // Says goodbye (close_notify), without waiting for the peer's.
  void close();

private:
  Bytes first_;  // first_bytes(), recorded by the socket's read callback until ready
  Channel() = default;
  Result<Io> io_result(int ret, const char* what);
  Result<Io> fill(uint8_t* to, size_t want, size_t* got);
  std::shared_ptr<Context> context_;
  void* ssl_ = nullptr;  // SSL
  int fd_ = -1;
  bool ready_ = false;
  bool closed_in_handshake_ = false;
  Peer peer_;
  std::string refusal_;  // why the verify callback refused the peer
  struct Piece {
    Bytes own;      // the bytes, if the channel holds them
    ByteView view;  // what to write: own, or the caller's
  };
  static constexpr size_t kInlineData = 64 * 1024;
  void queue(Bytes&& own, ByteView view);
  static Bytes head(wire::MsgType type, ByteView header, ByteView data, bool with_data);
  std::deque<Piece> out_;
  size_t out_at_ = 0, out_bytes_ = 0;  // bytes of out_.front() sent; bytes queued in all
  bool held_ = false;
  bool retrying_ = false;  // the last SSL_write did not complete: the next repeats it
  Result<Io> sent();  // after a send: flushes unless held
  void coalesce();    // the small pieces at the front of out_ into one
  // The frame being read: its 16-byte head, then its header and data.
  uint8_t head_[wire::kFrameHeaderSize] = {};
  size_t head_got_ = 0;
  bool in_body_ = false;
  uint64_t header_got_ = 0, data_got_ = 0, data_len_ = 0;
  uint64_t received_ = 0;
  static constexpr uint64_t kFirstData = 64 * 1024;
  friend int verify_chain(void*, void*);
};

}  // namespace xcargo::tls
