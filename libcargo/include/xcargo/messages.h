// What a node answers, as the client API returns it (format-spec/wire-protocol.md section 4):
// reply statuses, refusal kinds, and the fields of the replies a client reads. The codec that
// frames, encodes and decodes them is internal to libcargo (wire/wire.h).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "xcargo/error.h"
#include "xcargo/types.h"

namespace xcargo::wire {

// The protocol version this library speaks (hello and hello_reply carry it).
inline constexpr uint16_t kVersion = 7;

// ReplyStatus of a reply. Values are part of the protocol.
enum class ReplyStatus : uint16_t {
  ok = 0,
  kernel_error = 1,     // the entry returned non-zero (kernel_return says what)
  not_loaded = 2,       // the digest is not loaded here: push the cargo first
  no_entry = 3,
  reply_too_large = 4,
  crashed = 5,          // the kernel crashed; the node recovered
  timeout = 6,          // the kernel ran past the node's time limit; the node recovered
  refused = 7,          // the cargo failed verification, trust, variant selection or the allow-list
  internal = 8,
  bad_request = 9,      // a message that does not decode, or out of order
  limit = 10,           // a cargo or input larger than the node accepts
  unsupported_version = 11,
  hop_limit = 12,       // a forwarded computation went past the node's hop limit
  unreachable = 13,     // a forward's next node, or the client, could not be reached
  no_region = 14,       // the node has no memory region of that name
  sandbox = 15,         // the sandbox stopped the kernel (a system call of its own); the node recovered
  out_of_range = 16,    // a region read's bytes are not all inside the region
  unauthenticated = 17, // the connection has not authenticated, or its key may not do this
  interrupted = 18,     // this kernel was running when another one's failure replaced the worker; it may have partly run
  restarting = 19,      // the node is replacing its worker: this request did not run; send it again on a new connection
  cancelled = 20,       // version 6: its client cancelled it; queued, it did not run; running, it was stopped and the node recovered
};
inline constexpr uint16_t kMaxStatus = 20;

// What a loader asks of its clients (hello_reply's `auth`).
enum class AuthMode : uint16_t {
  none = 0,      // no authentication (a private local loader)
  optional = 1,  // open to anyone (allow-anyone); an identity is checked and logged if given
  required = 2,  // nothing but hello and auth until an authorized key has signed
};
const char* status_name(ReplyStatus s);

// Why a push was refused (push_reply's error_kind). Values are part of the protocol
// (wire-protocol.md, section 4.4), not the positions of libcargo's Errc: a new Errc changes
// nothing here. Clients tell verification failures (malformed to bad_signature, and revoked)
// from refused imports.
enum class ErrorKind : uint16_t {
  io = 0, invalid_argument = 1, malformed = 2, unsupported = 3, limit = 4, digest_mismatch = 5,
  manifest = 6, not_signed = 7, untrusted = 8, bad_signature = 9, key = 10, compile = 11, import = 12,
  other = 13,  // any other failure
  revoked = 14,  // a rule of the node's trust directory refuses the cargo
};
// The kind a node sends for one of libcargo's errors.
ErrorKind error_kind_of(Errc code);
// The libcargo kind a received value stands for; Errc::remote for `other` and unknown values.
Errc errc_of(ErrorKind kind);

using Nonce = std::array<uint8_t, 32>;
using RawKey = std::array<uint8_t, 32>;
using Sig = std::array<uint8_t, 64>;

struct HelloReply {
  uint16_t version = kVersion;
  ReplyStatus status = ReplyStatus::ok;
  uint32_t node_id = 0, node_count = 1;
  uint64_t max_cargo = 0, max_input = 0, max_reply = 0;
  std::string loader_version;
  AuthMode auth = AuthMode::none;
  Nonce nonce{};         // the node's challenge to the client
  RawKey node_key{};     // the node's Ed25519 public key
  Sig node_sig{};        // by node_key over auth::node_proof (both nonces, node_key)
};

struct PushReply {
  uint64_t request_id = 0;
  ReplyStatus status = ReplyStatus::ok;
  ErrorKind error_kind = ErrorKind::io;  // for refused: why (any u16 decodes; errc_of maps it)
  Digest digest{};
  bool already_loaded = false, jit_compiled = false, disk_cache_hit = false;
  std::string variant, message;
};

inline constexpr size_t kMaxLogLines = 16;     // a result's log: lines kept, each at most
inline constexpr size_t kMaxLogLine = 200;     // kMaxLogLine bytes (longer ones cut)

struct ResultMsg {
  uint64_t request_id = 0;
  ReplyStatus status = ReplyStatus::ok;
  int32_t kernel_return = 0;
  uint64_t output_size = 0;  // the AM data's length
  uint32_t node_id = 0;      // the node that ended the computation
  uint32_t hops = 0;         // forwards it took
  uint64_t kernel_ns = 0;    // how long the (last) kernel ran
  std::string variant, message;
  // Version 6: the kernel's xc_log lines, for an invoke that asked (kInvokeLog): the first
  // kMaxLogLines, and how many more it wrote.
  std::vector<std::string> log;
  uint16_t log_dropped = 0;
};

struct CargoListing {
  Digest digest{};
  uint64_t invocations = 0;
  std::string name, version, variant;
  std::vector<std::string> variants, entries;
};

struct RegionListing {
  std::string name;
  uint64_t length = 0;
};

struct Listing {  // list_reply's data
  std::vector<CargoListing> cargos;
  std::vector<RegionListing> regions;
  // Version 4: the node itself. triple: what its native objects must be built for (LLVM's
  // process triple); cpu: what it JIT-compiles bitcode for; prefer: "native" or "bitcode".
  std::string triple, cpu, prefer;
};

struct Counter {
  std::string name;
  uint64_t value = 0;
};

}  // namespace xcargo::wire
