// PortHold: a bound, never listening TCP socket that keeps the loader's port its own.
#include "port_hold.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "net/ucx.h"

namespace xcargo::loader {

PortHold& PortHold::operator=(PortHold&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(o.fd_, -1);
    address_ = std::move(o.address_);
  }
  return *this;
}

PortHold::~PortHold() {
  if (fd_ >= 0) ::close(fd_);
}

Result<PortHold> PortHold::bind(const std::string& host_port) {
  socklen_t len = 0;
  auto a = net::parse_host_port(host_port, &len);
  if (!a.ok()) return a.take_error();
  PortHold h;
  h.fd_ = ::socket(a->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (h.fd_ < 0) return Error(Errc::io, "listen " + host_port + ": cannot open a socket: " + std::strerror(errno));
  if (::bind(h.fd_, reinterpret_cast<const sockaddr*>(&*a), len) != 0) {
    const int e = errno;
    Error err(Errc::io, "listen " + host_port + ": cannot take the port: " + std::strerror(e));
    if (e == EADDRINUSE) err.hint("another process has it (another loader?): choose another port, or 0 for a free one");
    return err;
  }
  sockaddr_storage bound{};
  socklen_t blen = sizeof bound;
  if (::getsockname(h.fd_, reinterpret_cast<sockaddr*>(&bound), &blen) != 0)
    return Error(Errc::io, "listen " + host_port + ": " + std::strerror(errno));
  h.address_ = net::to_host_port(reinterpret_cast<const sockaddr*>(&bound));
  return h;
}

}  // namespace xcargo::loader
