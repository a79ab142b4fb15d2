// The xcargo wire protocol (version kVersion): message types, the requests, and the encoding of
// every message (the replies a client reads, and the status codes, are in xcargo/messages.h).
// Paired with format-spec/wire-protocol.md; change both together.
//
// Every message is a UCX Active Message whose id is the MsgType, whose AM header is the
// message's encoded header (below) and whose AM data is its bulk bytes (a cargo, an
// invocation's input, a result's output, a listing). Over a byte stream (the local one-shot
// mode) a message is framed as: u16 type, u16 reserved 0, u32 header_len, u64 data_len,
// header, data.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "xcargo/error.h"
#include "xcargo/messages.h"
#include "xcargo/types.h"

namespace xcargo::wire {

inline constexpr uint8_t kHelloMagic[4] = {'X', 'C', 'W', 'P'};
inline constexpr size_t kMaxHeader = 8192;        // no header is longer
inline constexpr size_t kMaxName = 64;            // entry and variant names
inline constexpr size_t kMaxMessage = 4096;       // human-readable texts
inline constexpr size_t kFrameHeaderSize = 16;
inline constexpr size_t kMaxAddress = 2048;      // a UCX worker address

enum class MsgType : uint16_t {
  hello = 1, hello_reply = 2,
  push = 3, push_reply = 4,
  has = 5, has_reply = 6,
  invoke = 7, result = 8,
  list = 9, list_reply = 10,
  stats = 11, stats_reply = 12,
  forward = 13,  // loader to loader; answered by a result to the client, from wherever the chain ends
  region = 15, region_reply = 16,              // where a region is, and its length
  region_read = 17, region_data = 18,          // bytes of a region, read by the loader with bounds checked
  auth = 19, auth_reply = 20,                  // the client proves its identity (section 7)
  lane = 21, lane_reply = 22,                  // a shared-memory lane for this connection (section 8)
  kick = 23,                                   // wakes the other end of a lane; no reply (section 8.3)
  relay = 25,  // loader to loader: a chain's result for a client of the origin node's front door (4.13); no reply
  cancel = 27, // version 6: stop an invoke of this connection (4.15); no reply of its own
};
inline constexpr uint16_t kMaxMsgType = 27;

struct Hello {
  uint16_t min_version = kVersion, max_version = kVersion;
  Bytes reply_address;  // the client's UCX worker address, for results of forwarded chains
  Nonce nonce{};        // version 3: the client's challenge to the node
};
struct Auth {  // client -> loader, after hello_reply
  uint64_t request_id = 0;
  RawKey client_key{};
  Sig signature{};       // by client_key over auth::client_proof
};
using SessionToken = std::array<uint8_t, 16>;
inline constexpr size_t kTokenSize = 16;
struct AuthReply {
  uint64_t request_id = 0;
  ReplyStatus status = ReplyStatus::ok;  // ok, or unauthenticated
  uint16_t verbs = 0;                    // what the key may do (auth::Verb bits)
  SessionToken token{};                  // ends every later request's header (section 7); zero unless ok
  std::string message;
};
struct Push {
  uint64_t request_id = 0;
  uint64_t cargo_size = 0;  // the AM data's length
};
struct Has {
  uint64_t request_id = 0;
  Digest digest{};
};
struct HasReply {
  uint64_t request_id = 0;
  bool has = false;
};
struct Invoke {
  uint64_t request_id = 0;
  Digest digest{};
  std::string entry;
  uint64_t input_size = 0;  // the AM data's length
  uint32_t timeout_ms = 0;  // version 6: the kernel's time limit for this request; 0: the node's (never above it)
  uint32_t flags = 0;       // version 6: kInvokeLog; other bits 0
};
inline constexpr uint32_t kInvokeLog = 1;  // the result carries the kernel's xc_log lines
// Where an invoke header's timeout_ms lies (wire-protocol.md 4.6), for servers that read it
// before decoding the header.
inline constexpr size_t kInvokeTimeoutOffset = 48;
struct Forward {  // AM data: the cargo (cargo_size bytes, may be 0), then the input
  uint64_t request_id = 0;   // the client's invoke
  Digest digest{};
  uint32_t hop = 0;          // 1 for the first forward
  uint32_t from_node = 0;
  uint64_t cargo_size = 0, input_size = 0;
  std::string entry;
  Bytes reply_address;       // the client's UCX worker address
};
// A reply_address that names no UCX worker but a connection of a node (section 4.13): the
// result goes to that node, in a `relay`, and on to the connection. Exactly 16 bytes.
struct RelayAddress {
  uint32_t node_id = 0;
  uint64_t relay_id = 0;  // random, nonzero: which connection of that node
};
inline constexpr size_t kRelayAddressSize = 16;
Bytes encode(const RelayAddress&);
// The relay address a reply_address is, if it is one.
std::optional<RelayAddress> relay_address_of(ByteView reply_address);
struct Relay {  // relay's header; its data is the result's data
  uint64_t relay_id = 0;
  Bytes result;  // the result's header (4.7)
};
struct RequestOnly {  // list and stats requests
  uint64_t request_id = 0;
};
struct RegionQuery {
  uint64_t request_id = 0;
  std::string name;
};
struct RegionReply {  // a node's region: its length; where it is only if the node allows one-sided reads
  uint64_t request_id = 0;
  ReplyStatus status = ReplyStatus::ok;
  uint64_t address = 0, length = 0;
  Bytes rkey;  // packed UCX remote key (ucp_rkey_pack); empty: read with region_read
};
struct RegionRead {  // reads [offset, offset + length) of a region; the loader checks the bounds
  uint64_t request_id = 0;
  uint64_t offset = 0, length = 0;
  std::string name;
};
struct RegionData {  // region_data's header; its data are the bytes read
  uint64_t request_id = 0;
  ReplyStatus status = ReplyStatus::ok;
  uint64_t length = 0;  // the data's length (0 unless ok)
};
struct LaneOffer {  // lane_reply's header (section 8.1)
  uint64_t request_id = 0;
  ReplyStatus status = ReplyStatus::ok;  // ok, or limit (the node has no lane to spare)
  int32_t shm_id = -1;                   // the System V segment, to attach by id
  std::array<uint8_t, 16> nonce{};       // what the segment's control page holds
  std::string message;
};

// Headers. Encoders never fail; decoders check every length and limit before use.
Bytes encode(const Hello&);
Bytes encode(const HelloReply&);
Bytes encode(const Push&);
Bytes encode(const PushReply&);
Bytes encode(const Has&);
Bytes encode(const HasReply&);
Bytes encode(const Invoke&);
Bytes encode(const ResultMsg&);
// The same into `into`'s storage (its contents replaced): the request path's headers, encoded
// without an allocation into a buffer kept from the last one.
Bytes encode(const Invoke&, Bytes&& into);
Bytes encode(const ResultMsg&, Bytes&& into);
Bytes encode(const Forward&, Bytes&& into);
// Headers of one kind, one after another, from the last one's bytes: results of one entry
// differ in request_id, kernel_return, output_size and kernel_ns only, forwards of one chain
// from one node in hop only; those fields are written into a copy of the last header, the
// rest encoded afresh when it differs (the same bytes as encode(m) either way). The encode
// took about 100 of the 850 cycles a worker spent on a pipelined invocation, and 140 of the
// 1800 of a forward hop. One per thread.
template <class M>
class Reencoder {
public:
  void encode(const M& m, Bytes& out);

private:
  Bytes last_;
  M key_;  // the last one's other fields
};
template <>
void Reencoder<ResultMsg>::encode(const ResultMsg& m, Bytes& out);
template <>
void Reencoder<Forward>::encode(const Forward& m, Bytes& out);
using ResultEncoder = Reencoder<ResultMsg>;
using ForwardEncoder = Reencoder<Forward>;
Bytes encode(const RequestOnly&);
Bytes encode(const Forward&);
Bytes encode(const RegionQuery&);
Bytes encode(const RegionReply&);
Bytes encode(const RegionRead&);
Bytes encode(const Auth&);
Bytes encode(const AuthReply&);
Bytes encode(const RegionData&);
Bytes encode(const LaneOffer&);
Bytes encode(const Relay&);
// The u64 request_id that every message but hello and hello_reply starts with (section 4),
// read without decoding the rest; nullopt for those two types or a header under 8 bytes.
std::optional<uint64_t> leading_request_id(MsgType type, ByteView header);
// A result header's status field, read without decoding the rest (a client's check for
// `restarting` on every reply); nullopt for a header too short to hold one.
std::optional<uint16_t> result_status(ByteView result_header);
Result<Hello> decode_hello(ByteView header);
Result<HelloReply> decode_hello_reply(ByteView header);
Result<Push> decode_push(ByteView header);
Result<PushReply> decode_push_reply(ByteView header);
Result<Has> decode_has(ByteView header);
Result<HasReply> decode_has_reply(ByteView header);
Result<Invoke> decode_invoke(ByteView header);
Result<ResultMsg> decode_result(ByteView header);
xcargo::Status decode_result_into(ByteView header, ResultMsg& into);  // the same into a message whose strings are reused
Result<RequestOnly> decode_request(ByteView header);
Result<Forward> decode_forward(ByteView header);
Result<RegionQuery> decode_region(ByteView header);
Result<RegionReply> decode_region_reply(ByteView header);
Result<RegionRead> decode_region_read(ByteView header);
Result<RegionData> decode_region_data(ByteView header);
Result<Auth> decode_auth(ByteView header);
Result<AuthReply> decode_auth_reply(ByteView header);
Result<LaneOffer> decode_lane_offer(ByteView header);
Result<Relay> decode_relay(ByteView header);

// Bulk data of list_reply and stats_reply (their header is a RequestOnly).
Bytes encode_listing(const Listing&);
Result<Listing> decode_listing(ByteView data);
Bytes encode_counters(const std::vector<Counter>&);
Result<std::vector<Counter>> decode_counters(ByteView data);

// Byte-stream framing (local one-shot mode).
struct Frame {
  MsgType type{};
  Bytes header, data;
};
Bytes encode_frame(MsgType type, ByteView header, ByteView data);
// A frame's first kFrameHeaderSize bytes: what follows them, checked against the limits (a
// known type, the reserved bytes 0, header at most kMaxHeader, data at most max_data) before
// a reader allocates anything for it.
struct FrameHead {
  MsgType type{};
  uint32_t header_len = 0;
  uint64_t data_len = 0;
};
Result<FrameHead> decode_frame_head(ByteView bytes, uint64_t max_data);
// Decodes one frame from the start of bytes; max_data bounds the data length before use.
Result<Frame> decode_frame(ByteView bytes, uint64_t max_data, size_t* consumed = nullptr);

}  // namespace xcargo::wire
