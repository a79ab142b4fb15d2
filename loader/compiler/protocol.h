// The messages between a worker and its compile service, one request and one reply at a
// time on a stream socket. Both ends check every length against its limit before allocating.
//   request: "XCRQ", u32 variant-name length, u64 cargo length, u32 flags (1: the quick tier
//            will do), the name, the signed cargo
//   reply:   "XCRP", u32 status (0: ok, else 1 + Errc), u32 flags (1: cache consulted, 2: hit,
//            4: damaged entry replaced, 8: the quick tier), u32 text length, u64 object
//            length, text, object.
//            text: for a failure its message and hints, one per line; for success a cache
//            store error or nothing.
#pragma once

#include <chrono>
#include <string>

#include "engine/codegen.h"
#include "xcargo/error.h"
#include "xcargo/types.h"

namespace xcargo::loader::compiler {

inline constexpr size_t kMaxVariantName = 256;
inline constexpr size_t kMaxText = 64 * 1024;
inline constexpr uint64_t kMaxObject = 256ull << 20;
inline constexpr size_t kReplyHeader = 24;

struct Request {
  std::string variant;
  Bytes cargo;
  bool allow_quick = false;
};

Bytes encode_request(const std::string& variant, ByteView cargo, bool allow_quick);
Bytes encode_reply(const Result<CompiledObject>& reply);

// One request from fd. Errc::unreachable when fd is closed before the first byte.
Result<Request> read_request(int fd, uint64_t max_cargo);
// One reply from fd, waiting at most until deadline.
Result<Result<CompiledObject>> read_reply(int fd, std::chrono::steady_clock::time_point deadline);
// The length of the reply that b begins with, header included, once b holds a valid
// header; 0 before (or for a header that is not one).
uint64_t reply_length(ByteView b);
// A whole reply held in memory (what a compile job wrote), or an error if it is not one.
Result<Result<CompiledObject>> decode_reply(ByteView bytes);

}  // namespace xcargo::loader::compiler
