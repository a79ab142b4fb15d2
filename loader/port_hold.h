// PortHold: a TCP port this process keeps bound, and never listens on, so that no other
// process takes it: the loader's name (its listen address, and its same-host door's) when no
// UCX listener holds the port. A connection to it is refused by the kernel; no byte is read.
#pragma once

#include <string>

#include "xcargo/error.h"

namespace xcargo::loader {

class PortHold {
public:
  PortHold() = default;
  PortHold(PortHold&& o) noexcept : fd_(o.fd_), address_(std::move(o.address_)) { o.fd_ = -1; }
  PortHold& operator=(PortHold&& o) noexcept;
  ~PortHold();

  // Binds HOST:PORT (port 0: one the kernel picks), close-on-exec. Errors name the address
  // and say whether another process has it.
  [[nodiscard]] static Result<PortHold> bind(const std::string& host_port);
  // HOST:PORT as bound (port 0 resolved).
  const std::string& address() const { return address_; }

private:
  int fd_ = -1;
  std::string address_;
};

}  // namespace xcargo::loader
