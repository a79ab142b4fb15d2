// The client API: connect to a node (or start a private local loader), push cargos, ask
// whether a node has one, invoke entries, list what is loaded, read statistics. The CLI's
// network verbs are thin layers over this.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "xcargo/error.h"
#include "xcargo/identity.h"
#include "xcargo/passphrase.h"
#include "xcargo/trust.h"
#include "xcargo/types.h"
#include "xcargo/wire.h"

namespace xcargo::client {

// A memory region of a node (xc_region), for reads with Connection::get.
struct RemoteRegion {
  std::string name;
  uint64_t address = 0, length = 0;
  Bytes rkey;  // the node's packed UCX remote key; empty unless the node allows one-sided reads
  uint64_t session = 0;  // the connection's handshake it came from: a key is good only there
};

struct InvokeReply {
  wire::ResultMsg result;
  Bytes output;  // once done with a large one (4 MiB or more), release_large (large_buffers.h)
                 // lets the next large reply land in pages already mapped
};

// One invocation of a pipelined batch (Connection::invoke_pipelined). input must stay valid
// until its reply has been handed to `done`.
struct Invocation {
  Digest digest{};
  std::string entry;
  ByteView input;
};

// One conversation with one node. Not thread-safe: use one per thread.
class Connection {
public:
  virtual ~Connection() = default;

  // What the node said in the handshake: its id, cluster size, limits, and whether it
  // authenticates clients (node().auth).
  const wire::HelloReply& node() const { return node_; }
  // The identity this connection authenticated with (key id in hex), empty if none, and
  // the verbs the node granted it (auth::Verb bits; all of them on an open node).
  const std::string& identity() const { return identity_id_; }
  uint16_t granted_verbs() const { return verbs_; }
  // "HOST:PORT", or "local loader".
  virtual std::string peer() const = 0;
  // Ends the conversation; later calls fail with Errc::unreachable. The destructor closes too.
  virtual void close() = 0;

  // Errors: Errc::unreachable when the node cannot be reached or the connection drops,
  // Errc::malformed when its reply does not decode. Refusals come back in the reply.
  Result<wire::PushReply> push(ByteView cargo);
  Result<bool> has(const Digest& digest);
  Result<InvokeReply> invoke(const Digest& digest, std::string_view entry, ByteView input);
  // The time limit of each kernel this connection's invokes run from now on (wire-protocol.md
  // 4.6): a node stops one past it with status `timeout`. Zero (the default) leaves the node's
  // own limit, and a node never allows more than its own.
  void set_kernel_timeout(std::chrono::milliseconds limit) { kernel_timeout_ms_ = uint32_t(std::clamp<int64_t>(limit.count(), 0, UINT32_MAX)); }
  // Stops the invoke this connection is waiting for, if any; the one call that is safe from
  // another thread. The node is sent `cancel` (wire-protocol.md 4.15) and the invoke returns
  // its answer: status `cancelled`, or the kernel's own result if it ended first. Within a
  // program whose signal handler calls interrupt_now() (xcargo/interrupt.h), a signal does
  // the same for the invoke under way.
  void cancel_invoke() { cancel_requested_.store(true, std::memory_order_relaxed); }
  // Whether this connection's invokes ask for their kernels' xc_log lines, which then come
  // back in InvokeReply::result.log (at most wire::kMaxLogLines; log_dropped counts the rest).
  void set_kernel_log(bool on) { invoke_flags_ = on ? wire::kInvokeLog : 0; }
  // The same into reply, whose buffers take the node's answer: a caller that invokes again and
  // again with one InvokeReply allocates nothing per call once warm (the other overload makes
  // a new reply, its output a new buffer, each time). On an error, reply holds nothing useful.
  Status invoke(const Digest& digest, std::string_view entry, ByteView input, InvokeReply& reply);
  // Runs count invocations, call(i) giving the i-th, keeping up to `window` of them in flight
  // on this connection (one at a time on transports that cannot pipeline, such as a local
  // loader's pipe). done(i, reply) is called once for every i, in the order replies arrive;
  // it may move from reply (else its buffers take the next reply: no allocation for it).
  // A request the node answered `restarting` (it did not run) is sent again on a new
  // connection once those in flight are answered. Returns an error, after telling `done`
  // for every invocation not yet told, when the connection is lost: those in flight may
  // have run.
  using InvokeDone = std::function<void(size_t index, Result<InvokeReply>& reply)>;
  // Whether invoke_pipelined keeps several in flight on this connection's transport.
  virtual bool pipelines() const { return false; }
  Status invoke_pipelined(size_t count, const std::function<Invocation(size_t)>& call, size_t window,
                          const InvokeDone& done);
  Result<wire::Listing> list();
  // The node's region `name`: its length, and where it is if one-sided reads are allowed
  // (Errc::remote if the node has no such region).
  Result<RemoteRegion> region(const std::string& name);
  // Reads len bytes at offset of one of this node's regions (Errc::invalid_argument outside
  // it, Errc::remote if the node refuses). One-sided (a UCX get: no code runs on the node)
  // when one_sided(region), else a region_read request that the node bounds-checks.
  Status get(const RemoteRegion& region, uint64_t offset, void* out, size_t len);
  // Whether get() reads region one-sidedly: the connection was opened with
  // ConnectOptions::one_sided and the node gave the region a key.
  bool one_sided(const RemoteRegion& region) const { return !region.rkey.empty() && can_get_one_sided(); }
  Result<std::vector<wire::Counter>> stats();

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
    ByteView make(const Connection& c, bool seal, uint64_t id, const Digest& digest, std::string_view entry, uint64_t input_size);
  };
  InvokeHeader request_header_;  // invoke's, unsealed: request() seals it
  uint32_t kernel_timeout_ms_ = 0;  // set_kernel_timeout
  uint32_t invoke_flags_ = 0;       // set_kernel_log
  std::atomic<bool> cancel_requested_{false};  // cancel_invoke
  uint64_t awaited_invoke_ = 0;                // the invoke whose reply invoke() waits for; 0: none
  bool cancel_sent_ = false;                   // for awaited_invoke_
  Bytes cancel_header_;
  // An invoke's result frame to request id, into r: its strings take the reply's (no
  // allocation), and its output buffer and f's data trade places.
  Status decode_invoke_reply(wire::Frame& f, uint64_t id, InvokeReply& r) const;
  // The same into out (a reply, or an error to be replaced by one).
  void invoke_reply(wire::Frame& f, uint64_t id, Result<InvokeReply>& out) const;
  wire::HelloReply node_;
  // Request ids start at a random value per connection: a result that someone else had a
  // node deliver to this client's address cannot name a request it is waiting for.
  static uint64_t first_request_id();
  uint64_t next_id_ = first_request_id();
  std::string identity_id_;
  uint16_t verbs_ = 0;
  std::optional<wire::SessionToken> token_;  // once authenticated: ends every request's header
  Bytes sealed_;  // the request being sent, sealed (its buffer reused)
  uint64_t session_ = 0;  // handshakes so far: a reconnect starts a new session
};

struct LocalOptions {
  std::string loader;        // path of xcargo-loader
  std::string trust;         // --trust of the loader
  std::string cache;         // --cache (optional)
  std::string prefer;        // native | bitcode (optional)
  unsigned timeout_s = 10;   // per-invocation limit; the loader is killed past it plus 1 s
};

struct ConnectOptions {
  // How long connect() may take in all: reaching the node, the TLS handshake, the version
  // handshake and authentication, and tries again; past it, Errc::unreachable ("no answer
  // within the connect timeout"). Also each reconnection's limit.
  int connect_timeout_ms = 5000;
  // connect(): a refused connection (nothing listens at the address) to a UCX listener
  // (ucx://, trusted-network) is tried again for this long (within connect_timeout_ms), then
  // fails: that listener belongs to the node's worker, and is closed for a moment while a
  // worker ended by a kernel's failure is replaced (0.15 s quiet, about 1 s busy). A TLS
  // front door and a loopback address's same-host door belong to the loader's supervisor,
  // open across such restarts: refused there, connect() fails at once, as ssh does.
  int refused_retry_ms = 1500;
  int retry_ms = 5000;             // after a node answered `restarting`: keep retrying a refused connection
                                   // this long: a node restarting after a kernel failure takes 0.15 s quiet,
                                   // about 1 s slow and busy
  int reply_timeout_ms = 120000;   // for any later reply (the node enforces its own kernel limit)
  // A wait for a reply polls 0.2 ms, sleeps until 0.5 ms before the last wait's length, and
  // polls again until twice that length, at most this long after it began; then it sleeps
  // until the reply wakes it. A sleeping client's wake-up costs 0.15 to 0.45 ms on a VM,
  // which repeated millisecond-scale kernels would pay at every call. 0: poll 0.2 ms only.
  int max_spin_us = 20000;
  // The private key that proves who this client is to nodes that authenticate clients;
  // empty: auth::default_identity_path() ($XCARGO_IDENTITY, ~/.config/xcargo/identity).
  std::string identity;
  // Where the identity's passphrase comes from, if it is encrypted.
  PassphraseSource identity_passphrase;
  // The identity already loaded (load_identity): then `identity` only names it. A program
  // that connects to several nodes loads it once, so an encrypted key is asked for once.
  std::shared_ptr<const SigningKey> identity_key;
  // Ask a node on this host for a shared-memory lane (wire-protocol.md section 8): small
  // requests and their replies then skip UCX. Also off when XCARGO_LANES=0.
  bool lane = true;
  // Read regions one-sidedly where the node allows it (its loader has one-sided-regions).
  // This process's UCX context then offers one-sided access too: over tcp and shared memory
  // the node (and any peer of this worker) could read and write this process's memory.
  bool one_sided = false;
  // Over TLS ("tls://HOST:PORT"): the node key to expect; unset: the one the known-nodes file
  // pins for the address (known_nodes, else auth::default_known_nodes_path()).
  std::optional<PublicKey> node_key;
  std::string known_nodes;
};

// The identity that options name (options.identity, else auth::default_identity_path()),
// loaded with its passphrase; null when there is none. Errors (Errc::key) start "identity: ".
Result<std::shared_ptr<const SigningKey>> load_identity(const ConnectOptions& options);

// How connect() reaches an address: "tls://HOST:PORT" over TLS 1.3 (a node's front door),
// "ucx://HOST:PORT" over UCX (a network whose every host is trusted, such as an RDMA
// fabric's), and a bare "HOST:PORT" over UCX when HOST is a loopback address (this host's
// processes only) and over TLS anywhere else: nothing crosses a network in clear unless the
// address says so. host_port is the address without its scheme. A bare loopback address
// is served through the loader's same-host door, which proves the loader is of this user;
// only "ucx://" lets a client connect to a UCX listener (a loader with trusted-network),
// where nothing proves who answers.
struct Route {
  bool tls = false;
  std::string host_port;
  bool ucx_listener = false;  // "ucx://": UCX's listener may serve it, without a door
};
Result<Route> route_of(const std::string& address);

// Connects to an xcargo-loader at an address (route_of): over UCX (shared memory, TCP or
// RDMA, as UCX chooses), or over TLS 1.3 (its front door: both ends prove their keys first,
// and everything travels encrypted; ConnectOptions::node_key), and performs the version
// handshake. The identity is loaded first
// (unless options.identity_key holds it), before the node's 10 s to authenticate start: a
// passphrase typed on the terminal does not count against them.
Result<std::unique_ptr<Connection>> connect(const std::string& host_port, const ConnectOptions& options = {});

// Starts `xcargo-loader --exec` as a child process and talks to it over pipes: the same
// verification, selection and allow-list as a node, in a process of its own, so that a
// crashing kernel cannot take the caller down. Sets SIGPIPE to ignored in this process, so
// that a loader that died gives an error instead of killing the caller.
Result<std::unique_ptr<Connection>> spawn_local(const LocalOptions& options);

}  // namespace xcargo::client
