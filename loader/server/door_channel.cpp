// The door keeper's messages with its worker: a fixed head, then the kind's variable bytes.
#include "server/door_channel.h"

#include <algorithm>
#include <cstring>

namespace xcargo::loader::door_channel {

namespace {
// kind (1), reserved (3), pid (4), uid (4), reserved (4), id (8), ticket (16): then bytes.
constexpr size_t kHead = 40;

bool known(uint8_t k) { return (k >= 1 && k <= 3) || (k >= 10 && k <= 14); }
}  // namespace

Bytes encode(const Message& m) {
  Bytes out(kHead + m.bytes.size());
  out[0] = uint8_t(m.kind);
  std::memcpy(out.data() + 4, &m.pid, 4);
  std::memcpy(out.data() + 8, &m.uid, 4);
  std::memcpy(out.data() + 16, &m.id, 8);
  std::memcpy(out.data() + 24, m.ticket.data(), m.ticket.size());
  std::copy(m.bytes.begin(), m.bytes.end(), out.begin() + long(kHead));
  return out;
}

std::optional<Message> decode(ByteView b) {
  if (b.size() < kHead || b.size() > kMaxMessage || !known(b[0])) return std::nullopt;
  if (b[1] || b[2] || b[3] || b[12] || b[13] || b[14] || b[15]) return std::nullopt;
  Message m;
  m.kind = Kind(b[0]);
  std::memcpy(&m.pid, b.data() + 4, 4);
  std::memcpy(&m.uid, b.data() + 8, 4);
  std::memcpy(&m.id, b.data() + 16, 8);
  std::memcpy(m.ticket.data(), b.data() + 24, m.ticket.size());
  m.bytes.assign(b.begin() + kHead, b.end());
  if (m.bytes.size() > door::kMaxBody) return std::nullopt;
  // What each kind must carry.
  const bool needs_bytes = m.kind == Kind::address || m.kind == Kind::dial || m.kind == Kind::dialed;
  if (needs_bytes && m.bytes.empty()) return std::nullopt;
  if ((m.kind == Kind::close || m.kind == Kind::gone || m.kind == Kind::lost) && !m.bytes.empty()) return std::nullopt;
  return m;
}

}  // namespace xcargo::loader::door_channel
