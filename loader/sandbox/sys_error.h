// The sandbox's error for a failed system call: "sandbox: WHAT: strerror".
#pragma once

#include <cerrno>
#include <cstring>
#include <string>

#include "xcargo/error.h"

namespace xcargo::loader::sandbox {

inline Error sys_error(const std::string& what, int err = errno) {
  return Error(Errc::io, "sandbox: " + what + ": " + std::strerror(err));
}

}  // namespace xcargo::loader::sandbox
