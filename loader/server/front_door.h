// The worker's TLS front door (format-spec/wire-protocol.md 2.3): a TCP listener whose
// connections prove their keys in a TLS 1.3 handshake before any byte of theirs reaches the
// wire protocol's parser; afterwards their frames go to the server as UCX's messages do.
// Leader only, as everything that calls into a transport. The process ignores SIGPIPE (the
// loader does): a peer that went away is an error on its connection, not the worker's end.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "xcargo/error.h"
#include "net/tls.h"
#include "wire/wire.h"

namespace xcargo::loader {

// A frame sent on a dialed connection before its handshake was done.
struct Held {
  wire::MsgType type;
  Bytes header, data;
};

// One connection through the front door.
struct TlsConn {
  std::unique_ptr<tls::Channel> channel;
  std::string peer;  // HOST:PORT it came from
  std::chrono::steady_clock::time_point since;  // accepted
  bool ready = false;        // its handshake is done
  bool writing = false;      // its socket is watched for room to write
  bool busy = false;         // stopped reading at the per-poll budget: read again next poll
  bool dialed = false;       // this worker connected to peer (dial), rather than accepted it
  bool connecting = false;   // dialed, and its TCP connection not known to be made yet
  wire::Frame in;            // the frame being read (buffers reused)
  std::vector<Held> held;    // sent before the handshake was done (dialed connections)
  tls::RawKey key{};         // the identity its handshake proved (once ready)
  uint64_t partial = 0;      // data bytes the frame being read declared (0: none in progress)
  std::chrono::steady_clock::time_point partial_since;  // when that frame's head came
};

class FrontDoor {
public:
  using Clock = std::chrono::steady_clock;
  struct Events {
    // A TCP connection from peer (HOST:PORT): whether to take it in (else it is closed at
    // once, before any byte of it is read). Its handshake starts. Not called for dial().
    std::function<bool(TlsConn&)> accepted;
    // Its handshake is done: the other end proved the identity in peer (for a connection
    // this worker dialed, one the dialing context accepted).
    std::function<void(TlsConn&, const tls::Peer&)> ready;
    // One whole frame from a ready connection (it may be moved from).
    std::function<void(TlsConn&, wire::Frame&)> frame;
    // The connection failed, or its peer closed it, or its handshake did not finish within
    // the handshake deadline: it is freed when this returns (why, for the log).
    std::function<void(TlsConn&, const std::string& why, bool in_handshake)> lost;
    // The largest frame data taken (larger ones close the connection before allocation).
    std::function<uint64_t()> max_data;
    // Data bytes that frames still arriving may have declared, over all connections of one
    // key and over all connections: a frame that would pass either closes its connection
    // before allocation (those still arriving hold memory before any request limit sees
    // them). None: no limit.
    std::function<uint64_t()> max_partial_per_key, max_partial_total;
    // The keeper's answer to ask_dial(id): fd, a connection made to `what` (the dialed
    // HOST:PORT, its route sent), to adopt; or -1, and `what` says why not. fd is the callee's
    // to close.
    std::function<void(uint64_t id, int fd, const std::string& what)> dial_answer;
  };

  // Listens on HOST:PORT (port 0: a free one), retrying for up to `wait` while the port is
  // still taken. *address: the HOST:PORT it listens on. Its connections start with their TLS
  // handshake: a loader's workers take theirs from the keeper instead (from_keeper), which
  // has read each one's route (wire-protocol.md 2.3); this serves the tests of the TLS side alone.
  static Result<std::unique_ptr<FrontDoor>> listen(const std::string& host_port, std::shared_ptr<tls::Context> context,
                                                   Events events, std::chrono::milliseconds wait, std::string* address);
  // Takes connections from the supervisor's keeper (tls_keeper.h) instead: each arrives on
  // channel_fd (this worker's end, a SOCK_SEQPACKET socket) as one packet carrying its
  // descriptor. The FrontDoor owns channel_fd.
  static Result<std::unique_ptr<FrontDoor>> from_keeper(int channel_fd, std::shared_ptr<tls::Context> context, Events events);
  ~FrontDoor();
  FrontDoor(const FrontDoor&) = delete;
  FrontDoor& operator=(const FrontDoor&) = delete;

  // Readable when there is something to do (an epoll descriptor): wait on it beside others.
  int fd() const { return epfd_; }
  // The settings connections accepted from now on get (a renewed credential).
  void set_context(std::shared_ptr<tls::Context> context) { context_ = std::move(context); }
  // A connection from this worker to HOST:PORT with `context` (a client's: this worker's
  // credential, the peer it accepts), made in the background and polled with the others,
  // with the same events but `accepted`: a failure to connect is a lost handshake. Frames
  // sent before it is ready wait for its handshake. Null (*why) if it cannot even start.
  TlsConn* dial(const std::string& host_port, std::shared_ptr<tls::Context> context, std::string* why);
  // A door fed by the keeper dials through it: the keeper makes the connection (the worker
  // opens no socket) and answers through events.dial_answer. False (*why) if the channel
  // cannot take the request.
  bool keeper_dials() const { return from_keeper_; }
  bool ask_dial(uint64_t id, const std::string& host_port, std::string* why);
  // dial()'s connection on fd, a socket connecting to host_port (the keeper's answer):
  // owned from here, whatever fails. Null (*why) if it cannot start.
  TlsConn* adopt_dialed(int fd, const std::string& host_port, std::shared_ptr<tls::Context> context, std::string* why);
  // Accepts, advances handshakes, reads whole frames (events.frame), writes what waits.
  // Whether anything happened.
  bool poll();
  // Connections whose handshake has not finished within `deadline` are lost (events.lost), and
  // so are those whose frame in progress did not arrive within transfer_deadline(its bytes).
  void sweep(Clock::time_point now, std::chrono::milliseconds deadline,
             const std::function<std::chrono::milliseconds(uint64_t)>& transfer_deadline);
  // Data bytes declared by frames in progress, in all.
  uint64_t partial_total() const { return partial_total_; }

  // Queues a frame on c and sends what its socket takes now; false (and c lost, reported
  // at the next poll) if the connection failed.
  bool send(TlsConn& c, wire::MsgType type, ByteView header, Bytes&& data);
  // Bytes queued on c that its socket has not taken yet.
  size_t queued(const TlsConn& c) const { return c.channel->queued(); }
  // Closes c now (no event): it says goodbye and is freed.
  void close(TlsConn* c);
  // No new connections from now on (the port is free, or the keeper's channel closed: what
  // it had passed and this worker had not taken waits for no one); those open stay.
  void stop_listening();
  // Why new connections can no longer come in, though stop_listening() was not called: its
  // listening socket (or its channel from the keeper) closed or shut down, or its descriptor
  // another file now (a kernel can close any of its worker's descriptors), or its epoll set
  // gone. Empty while it listens.
  std::string deaf() const;
  size_t size() const { return conns_.size(); }
  // Bytes queued on all connections.
  size_t queued_total() const;
  // Every connection, closed (no events).
  void close_all();

private:
  FrontDoor() = default;
  void accept_all();
  // A connection's socket (accepted here, or passed by the keeper), from peer: its handshake starts.
  void take(int fd, const std::string& peer);
  // Moves c on as far as its socket allows; false if it was lost (and freed).
  bool drive(TlsConn& c);
  // Reads and hands on up to kFramesPerPoll frames; false if c was lost (and freed).
  bool receive_frames(TlsConn& c);
  // Sends what c has queued, as far as its socket takes it; false if c was lost (and freed).
  bool flush_out(TlsConn& c);
  void lose(TlsConn& c, const std::string& why);
  void watch_writes(TlsConn& c, bool on);
  // The largest frame data c may take now (max_data, less what its key's and everyone's
  // frames in progress on other connections declared).
  uint64_t allowance(const TlsConn& c) const;
  void set_partial(TlsConn& c, uint64_t bytes);

  // A listening socket, or (from_keeper_) this worker's channel from the keeper.
  int listen_fd_ = -1, epfd_ = -1;
  bool from_keeper_ = false;
  std::shared_ptr<tls::Context> context_;
  Events ev_;
  std::map<TlsConn*, std::unique_ptr<TlsConn>> conns_;
  std::vector<TlsConn*> failed_;  // failed inside send(): lost at the next poll
  std::map<tls::RawKey, uint64_t> partial_by_key_;  // TlsConn::partial summed by key
  uint64_t partial_total_ = 0;
};

// Frames read from one connection per poll before the others get their turn.
inline constexpr int kFramesPerPoll = 64;
// Connections accepted per poll: a flood of them cannot hold up the requests of those in.
inline constexpr int kAcceptsPerPoll = 32;
// Frames of at most this much data are bounded by their key's share of frames in progress,
// not by the total (FrontDoor::Events::max_partial_total).
inline constexpr uint64_t kSmallFrame = 64 * 1024;

}  // namespace xcargo::loader
