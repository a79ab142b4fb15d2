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
#include "xcargo/messages.h"
#include "xcargo/passphrase.h"
#include "xcargo/trust.h"
#include "xcargo/types.h"

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
  Bytes output;
};

// One invocation of a pipelined batch (Connection::invoke_pipelined). input must stay valid
// until its reply has been handed to `done`.
struct Invocation {
  Digest digest{};
  std::string entry;
  ByteView input;
};

// One conversation with one node. Not thread-safe: use one per thread (cancel_invoke excepted).
// Made by connect() or spawn_local(); the transports implement it inside libcargo.
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
  virtual Result<wire::PushReply> push(ByteView cargo) = 0;
  virtual Result<bool> has(const Digest& digest) = 0;
  virtual Result<InvokeReply> invoke(const Digest& digest, std::string_view entry, ByteView input) = 0;
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
  void set_kernel_log(bool on) { kernel_log_ = on; }
  // The same into reply, whose buffers take the node's answer: a caller that invokes again and
  // again with one InvokeReply allocates nothing per call once warm (the other overload makes
  // a new reply, its output a new buffer, each time). On an error, reply holds nothing useful.
  virtual Status invoke(const Digest& digest, std::string_view entry, ByteView input, InvokeReply& reply) = 0;
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
  virtual Status invoke_pipelined(size_t count, const std::function<Invocation(size_t)>& call, size_t window,
                                  const InvokeDone& done) = 0;
  virtual Result<wire::Listing> list() = 0;
  // The node's region `name`: its length, and where it is if one-sided reads are allowed
  // (Errc::remote if the node has no such region).
  virtual Result<RemoteRegion> region(const std::string& name) = 0;
  // Reads len bytes at offset of one of this node's regions (Errc::invalid_argument outside
  // it, Errc::remote if the node refuses). One-sided (a UCX get: no code runs on the node)
  // when one_sided(region), else a region_read request that the node bounds-checks.
  virtual Status get(const RemoteRegion& region, uint64_t offset, void* out, size_t len) = 0;
  // Whether get() reads region one-sidedly: the connection was opened with
  // ConnectOptions::one_sided and the node gave the region a key.
  virtual bool one_sided(const RemoteRegion& region) const = 0;
  virtual Result<std::vector<wire::Counter>> stats() = 0;

protected:
  Connection() = default;
  wire::HelloReply node_;     // node()
  std::string identity_id_;  // identity()
  uint16_t verbs_ = 0;        // granted_verbs()
  uint32_t kernel_timeout_ms_ = 0;              // set_kernel_timeout
  bool kernel_log_ = false;                     // set_kernel_log
  std::atomic<bool> cancel_requested_{false};  // cancel_invoke
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
