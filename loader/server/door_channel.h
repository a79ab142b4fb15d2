// The messages between the supervisor's door keeper and its serving worker about the
// same-host door (wire protocol 2.4): one per datagram of a SOCK_SEQPACKET pair made before
// the worker's fork. The keeper parses what a worker sends as it would a stranger's: a
// kernel running in the worker can write to its end.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "net/door.h"
#include "xcargo/types.h"

namespace xcargo::loader::door_channel {

enum class Kind : uint8_t {
  // worker -> keeper
  address = 1,  // the worker serves: its UCX worker address (taken once per worker)
  close = 2,    // id: the worker dropped that door connection; its lifeline is closed
  dial = 3,     // id (the worker's number for it), text: a peer's HOST:PORT to open the door of
  // keeper -> worker
  client = 10,  // id, ticket, pid, uid: a door connection was offered this worker's address
  gone = 11,    // id: that door connection's other end closed it (the client is gone)
  dialed = 12,  // id (the dial's), ticket, bytes: the peer's offer; its lifeline is held by the keeper
  dial_failed = 13,  // id, text: why the peer's door did not open
  lost = 14,    // id (a dial's): the peer's end of that lifeline closed
};

struct Message {
  Kind kind{};
  uint64_t id = 0;
  door::Ticket ticket{};
  uint32_t pid = 0, uid = 0;
  Bytes bytes;  // an address, a HOST:PORT or a reason
};

// The largest datagram: a header, a ticket and a worker address at the door's own limit.
constexpr size_t kMaxMessage = 64 + door::kMaxBody;

Bytes encode(const Message& m);
// Nullopt for anything not a whole, known message within the limits.
std::optional<Message> decode(ByteView b);

}  // namespace xcargo::loader::door_channel
