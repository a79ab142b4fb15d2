// Fuzz target: what a loader's TLS listener reads from a peer that has proved no key: the
// bytes of a handshake's first flight, given to a server channel (OpenSSL parses them; the
// chain check runs if they carry certificates). Nothing but a refusal or a wait may come of
// them: a handshake that completes, or a frame received, is a failure.
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>

#include "net/tls.h"

using namespace xcargo;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::shared_ptr<tls::Context> server = [] {
    auto node = SigningKey::generate();
    auto cred = tls::Credential::self_signed(*node);
    // No client key is accepted: nothing the input holds can be authorized.
    auto c = tls::Context::create(tls::Context::server, *cred, [](const tls::Peer&, std::string* why) {
      *why = "no client key is accepted";
      return false;
    });
    if (!c.ok()) std::abort();
    return *c;
  }();
  if (size > 65536) return 0;  // a socket buffer's worth
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) std::abort();
  ::fcntl(fds[1], F_SETFL, O_NONBLOCK);
  for (size_t off = 0; off < size;) {
    const ssize_t n = ::write(fds[0], data + off, size - off);
    if (n <= 0) break;
    off += size_t(n);
  }
  ::shutdown(fds[0], SHUT_WR);
  auto ch = tls::Channel::start(server, fds[1]);
  if (!ch.ok()) std::abort();
  for (int i = 0; i < 64; ++i) {
    auto r = (*ch)->handshake();
    if (!r.ok() || *r == tls::Channel::Io::want_read || *r == tls::Channel::Io::closed) break;
    if (*r == tls::Channel::Io::done) std::abort();
  }
  ::close(fds[0]);
  return 0;
}
