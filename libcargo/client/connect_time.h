// How a connection's setup spends its time: one deadline for every step and try
// (ConnectOptions::connect_timeout_ms), and durations as messages give them. Internal to
// libcargo/client.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

namespace xcargo::client {

// Milliseconds left until deadline, at least 1: a step given what is left still tries once.
inline int ms_until(std::chrono::steady_clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
  return int(std::clamp<long long>(left, 1, 1 << 30));
}

// "250 ms", "1.5 s", "10 s".
inline std::string duration_text(int ms) {
  if (ms < 1000) return std::to_string(ms) + " ms";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", ms / 1000.0);
  return buf;
}

}  // namespace xcargo::client
