// Requests in flight: the check and the charge.
#include "server/in_flight.h"

namespace xcargo::loader {

std::string over_limit(const Usage* connection, const Usage* key, uint64_t length, uint64_t largest) {
  if (length > largest) length = 0;
  auto check = [&](const Usage* u, int max_requests, uint64_t max_bytes, const char* whose) -> std::string {
    if (!u) return {};
    if (const int n = u->requests.load(); n >= max_requests)
      return std::string(whose) + " has " + std::to_string(n) + " requests in flight, the node's limit";
    if (const uint64_t b = u->bytes.load() + u->replies.load(); b + length > max_bytes)
      return std::string(whose) + " has " + std::to_string(b) + " bytes of requests and unread replies in flight; " +
             std::to_string(length) + " more would pass the node's limit of " + std::to_string(max_bytes);
    return {};
  };
  std::string why = check(connection, kMaxRequestsPerConnection, kBytesInFlightPerConnection * largest, "this connection");
  if (why.empty()) why = check(key, kMaxRequestsPerKey, kBytesInFlightPerKey * largest, "this key");
  return why;
}

std::string unread_over_limit(const Usage* connection, const Usage* key, uint64_t size, uint64_t largest) {
  auto check = [&](const Usage* u, uint64_t max_bytes, const char* whose) -> std::string {
    if (!u) return {};
    if (const uint64_t b = u->replies.load(); b + size > max_bytes)
      return std::string(whose) + " has " + std::to_string(b) + " bytes of replies its client has not read; " +
             std::to_string(size) + " more would pass the node's limit of " + std::to_string(max_bytes);
    return {};
  };
  std::string why = check(connection, kBytesInFlightPerConnection * largest, "this connection");
  if (why.empty()) why = check(key, kBytesInFlightPerKey * largest, "this key");
  return why;
}

Charge::Charge(std::shared_ptr<Usage> connection, std::shared_ptr<Usage> key, uint64_t bytes, Kind kind)
    : usage_{std::move(connection), std::move(key)}, bytes_(bytes), kind_(kind) {
  for (auto& u : usage_)
    if (u && kind_ == request) u->requests.fetch_add(1), u->bytes.fetch_add(bytes_);
    else if (u) u->replies.fetch_add(bytes_);
}

Charge::~Charge() {
  for (auto& u : usage_)
    if (u && kind_ == request) u->requests.fetch_sub(1), u->bytes.fetch_sub(bytes_);
    else if (u) u->replies.fetch_sub(bytes_);
}

}  // namespace xcargo::loader
