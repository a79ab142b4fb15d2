// The same-host door (format-spec/wire-protocol.md section 2.4): a Unix socket through which a
// loader hands a process of its own user its UCX worker address and a ticket, the kernel
// vouching for both ends' user ids (SO_PEERCRED) before a byte is sent. The loader reads one
// frame from it, the client's route. The connection stays open as the session's lifeline:
// either end closing it ends the session.
#pragma once

#include <sys/types.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "xcargo/error.h"
#include "xcargo/types.h"

namespace xcargo::door {

constexpr uint8_t kVersion = 1;
constexpr size_t kHeaderSize = 12;
// A UCX worker address: about 100 bytes with shared memory, a few hundred with every
// network device of a large host; 16 KiB leaves room for RDMA devices.
constexpr size_t kMaxBody = 16 * 1024;

enum class Kind : uint8_t {
  offer = 1,    // the body is a ticket, then the loader's UCX worker address
  refused = 2,  // the body says why the door will not open (UTF-8), with a hint after a '\n'
  route = 3,    // client -> loader, first: the key it will prove, and a node's tenant (below)
  denied = 4,   // the route's key (or tenant) is not served here: as `refused`, but not to be tried again
};

struct Frame {
  Kind kind = Kind::offer;
  Bytes body;
};

// The UCX Active Message id of `door` (wire-protocol.md 4.14): a client's first message on an
// endpoint made from an offer, its header the offer's ticket. UCX only (no stream carries it).
constexpr uint16_t kClaimMessage = 26;
// What a client presents first over UCX (the `door` message) to claim its door connection.
using Ticket = std::array<uint8_t, 16>;
Frame offer(const Ticket& ticket, ByteView worker_address);

// What a connection says first, at the door and at a TLS front door (before its TLS
// handshake): the key it will prove, by which the loader routes it to the workers of that
// key's tenant (the proof comes later, to that worker: believed for routing only).
// A cluster node's key also names the tenant it acts for (1 to 32 bytes); a client's names
// none. Body: the 32-byte key, then the tenant's name.
struct Route {
  std::array<uint8_t, 32> key{};
  std::string tenant;
};
constexpr size_t kRouteKey = 32, kMaxRouteTenant = 32;
Frame route(const Route& c);
// The route a frame holds; its header was checked (decode_header bounds a route's length).
[[nodiscard]] Result<Route> parse_route(const Frame& f);

// A loader's reading of a connection's route, without blocking: read_route takes what the
// socket has, never more than the route's frame (what follows it, a TLS handshake, stays in
// the socket), its header checked before its body.
struct RouteReading {
  uint8_t buf[kHeaderSize + kRouteKey + kMaxRouteTenant];
  size_t got = 0, want = kHeaderSize;
};
enum class RouteStep { more, done, failed };
// more: wait for the socket to be readable again; done: *out holds the route; failed: *why
// says what was wrong (a malformed frame, the connection's end, a socket error).
RouteStep read_route(int fd, RouteReading& r, Route* out, std::string* why);

// The socket's name in the abstract namespace (no leading NUL): one per loader listen
// address, within a network namespace, as a port is.
std::string socket_name(const std::string& host_port);

Bytes encode(const Frame& f);
// Checks a frame's header (magic, version, kind, reserved, length within kMaxBody, a route's
// within 32 to 64); returns the body's length.
Result<size_t> decode_header(ByteView header);

struct Credentials {
  pid_t pid = 0;
  uid_t uid = 0;
};
// The process at the other end of a Unix socket, as the kernel saw it connect or listen.
Result<Credentials> peer_of(int fd);

// A listening socket (non-blocking, close-on-exec) named for host_port.
Result<int> listen(const std::string& host_port);

// Reads one frame within `limit`, its header checked before its body is read (fd may be
// non-blocking). `from` names the other end in errors.
Result<Frame> read_frame(int fd, std::chrono::milliseconds limit, const std::string& from);
// Writes one frame whole within `limit` (at a door, or a route at a TLS front door); the
// error says what the socket said, the caller where.
Status write_frame(int fd, const Frame& f, std::chrono::milliseconds limit);

// A client's side: connects to host_port's door, refuses an end that is not this process's
// own user, and returns the loader's offer with the connection (the lifeline, close-on-exec,
// owned by the caller).
struct Opened {
  int fd = -1;
  Ticket ticket{};
  Bytes address;  // the loader's UCX worker address
};
Result<Opened> open(const std::string& host_port, const Route& route, std::chrono::milliseconds limit);
// open() in two steps, for a caller that waits for many things at once: the connection
// (made at once while the loader's backlog has room; its user id checked; `route` sent),
// then, once it is readable, the offer (or the refusal, as an error). read_offer closes fd
// on failure. *refused (when given) is set when nothing listens at the door (no loader of
// that name on this host), and cleared otherwise.
Result<int> connect(const std::string& host_port, const Route& route, bool* refused = nullptr);
Result<Opened> read_offer(int fd, const std::string& host_port, std::chrono::milliseconds limit);
// A TLS front door answers a route it does not serve with `denied` in place of its TLS
// handshake (wire-protocol.md 2.4). The client's side: when the first bytes it received in
// its handshake (tls::Channel::first_bytes) are a whole `denied` or `refused` frame, the
// refusal as an error (unauthenticated for `denied`); nullopt otherwise.
std::optional<Error> refusal_in(ByteView first, const std::string& host_port);

}  // namespace xcargo::door
