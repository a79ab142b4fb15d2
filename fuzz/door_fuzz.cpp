// Fuzz target: what the same-host door parses. The first byte picks the reader: a door frame
// as either end reads it from a socket (door::read_frame, header checked before the body; a
// route parsed as the keepers parse it), or a message of the door keeper's channel as the
// supervisor reads it from a worker (door_channel::decode), which must encode back to the
// same bytes.
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>

#include "server/door_channel.h"
#include "net/door.h"

using namespace xcargo;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0 || size > 65536) return 0;  // a socket buffer's worth
  const ByteView in(data + 1, size - 1);
  if (data[0] % 2 == 0) {
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) std::abort();
    for (size_t off = 0; off < in.size();) {
      const ssize_t n = ::write(fds[0], in.data() + off, in.size() - off);
      if (n <= 0) break;
      off += size_t(n);
    }
    ::shutdown(fds[0], SHUT_WR);
    auto f = door::read_frame(fds[1], std::chrono::milliseconds(100), "fuzz");
    if (f.ok()) {  // a frame read is one whose header said so, whole
      auto len = door::decode_header(in.first(std::min(in.size(), door::kHeaderSize)));
      if (!len.ok() || *len != f->body.size() || f->body.size() > door::kMaxBody) std::abort();
      if (f->kind == door::Kind::route) {  // a route's header bounds it: it parses, and encodes back
        auto r = door::parse_route(*f);
        if (!r.ok() || door::route(*r).body != f->body) std::abort();
      }
    }
    ::close(fds[0]);
    ::close(fds[1]);
  } else if (auto m = loader::door_channel::decode(in)) {
    const Bytes again = loader::door_channel::encode(*m);
    if (again.size() != in.size() || !std::equal(again.begin(), again.end(), in.begin())) std::abort();
  }
  return 0;
}
