// Fuzz target: every wire-protocol decoder. The first byte picks the decoder, the rest is
// the message. A message that decodes must encode back to the same bytes (the encodings are
// canonical), except hello, whose version 1 form decodes without its address.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "wire/lane.h"
#include "wire/wire.h"

using namespace xcargo;
using namespace xcargo::wire;

namespace {
template <class Decode>
void round_trip(ByteView in, Decode decode) {
  auto m = decode(in);
  if (!m.ok()) return;
  Bytes again = encode(*m);
  if (again.size() != in.size() || !std::equal(again.begin(), again.end(), in.begin())) std::abort();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const ByteView in(data + 1, size - 1);
  switch (data[0] % 23) {
    case 0: (void)decode_hello(in); break;
    case 1: round_trip(in, decode_hello_reply); break;
    case 2: round_trip(in, decode_push); break;
    case 3: round_trip(in, decode_push_reply); break;
    case 4: round_trip(in, decode_has); break;
    case 5: round_trip(in, decode_has_reply); break;
    case 6: round_trip(in, decode_invoke); break;
    case 7: {
      round_trip(in, decode_result);
      // Into a message holding the last input's result (the client's pipelined loop): the
      // same verdict, and nothing of the last one left in it.
      static ResultMsg reused;
      const auto fresh = decode_result(in);
      if (decode_result_into(in, reused).ok() != fresh.ok()) std::abort();
      if (fresh.ok() && encode(reused) != encode(*fresh)) std::abort();
      break;
    }
    case 8: round_trip(in, decode_request); break;
    case 9: round_trip(in, decode_forward); break;
    case 10: round_trip(in, decode_region); break;
    case 11: round_trip(in, decode_region_reply); break;
    case 12:
      if (auto l = decode_listing(in); l.ok() && encode_listing(*l) != Bytes(in.begin(), in.end())) std::abort();
      break;
    case 13:
      if (auto c = decode_counters(in); c.ok() && encode_counters(*c) != Bytes(in.begin(), in.end())) std::abort();
      break;
    case 14: round_trip(in, decode_region_read); break;
    case 15: round_trip(in, decode_region_data); break;
    case 16: round_trip(in, decode_auth); break;
    case 17: round_trip(in, decode_auth_reply); break;
    case 18: round_trip(in, decode_lane_offer); break;
    case 19: {  // a lane slot as a client wrote it (its seq set): copied out whole and within, or refused
      static std::vector<uint8_t> segment(lane::kSegmentSize);
      uint8_t* slot = segment.data() + lane::kOffRequests;
      std::memset(slot, 0, lane::kSlotSize);
      std::memcpy(slot + 8, in.data(), std::min(in.size(), size_t(lane::kSlotSize - 8)));
      const uint64_t seq = 1;
      std::memcpy(slot, &seq, 8);
      Bytes buf;
      MsgType type{};
      ByteView h, d;
      std::string why;
      const lane::Ring r = lane::Segment(segment.data()).requests();
      if (r.read(0, buf, &type, &h, &d, &why) == lane::Ring::Got::frame &&
          (h.size() + d.size() > lane::kCapacity || h.data() < buf.data() || d.data() + d.size() > buf.data() + buf.size()))
        std::abort();
      break;
    }
    case 20: round_trip(in, decode_relay); break;
    case 21:
      if (auto a = relay_address_of(in); a && encode(*a) != Bytes(in.begin(), in.end())) std::abort();
      break;
    default: {
      size_t used = 0;
      if (auto f = decode_frame(in, 1 << 20, &used); f.ok() && used > in.size()) std::abort();
    }
  }
  return 0;
}
