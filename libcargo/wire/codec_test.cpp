// Tests of the wire codec: every message round-trips, and every truncation, extension or
// out-of-limit field is refused without crashing.
#include <catch2/catch.hpp>

#include <functional>
#include <utility>

#include "wire/wire.h"

using namespace xcargo;
using namespace xcargo::wire;

namespace {

Digest some_digest() {
  Digest d{};
  for (size_t i = 0; i < d.size(); ++i) d[i] = uint8_t(i * 7 + 1);
  return d;
}

// Every proper prefix (but `allowed`) and a one-byte extension of a valid encoding must fail
// to decode.
template <class Decode>
void check_strict(const Bytes& good, Decode decode, size_t allowed = SIZE_MAX) {
  REQUIRE(decode(good).ok());
  for (size_t n = 0; n < good.size(); ++n) {
    INFO("prefix of " << n << " bytes");
    if (n != allowed) CHECK_FALSE(decode(ByteView(good).first(n)).ok());
  }
  Bytes longer = good;
  longer.push_back(0);
  CHECK_FALSE(decode(longer).ok());
}

}  // namespace

TEST_CASE("error kinds have the values the wire spec gives them, whatever Errc's order", "[wire]") {
  // format-spec/wire-protocol.md, section 4.4.
  const std::pair<Errc, uint16_t> spec[] = {
      {Errc::io, 0},        {Errc::invalid_argument, 1}, {Errc::malformed, 2}, {Errc::unsupported, 3},
      {Errc::limit, 4},     {Errc::digest_mismatch, 5},  {Errc::manifest, 6},  {Errc::not_signed, 7},
      {Errc::untrusted, 8}, {Errc::bad_signature, 9},    {Errc::key, 10},      {Errc::compile, 11},
      {Errc::import, 12},   {Errc::revoked, 14},
  };
  for (const auto& [code, value] : spec) {
    CHECK(uint16_t(error_kind_of(code)) == value);
    CHECK(errc_of(ErrorKind(value)) == code);
  }
  for (Errc never_sent : {Errc::remote, Errc::unreachable, Errc::unauthenticated})
    CHECK(error_kind_of(never_sent) == ErrorKind::other);
  CHECK(uint16_t(ErrorKind::other) == 13);
  CHECK(errc_of(ErrorKind::other) == Errc::remote);
  CHECK(errc_of(ErrorKind(999)) == Errc::remote);  // a kind from a newer node
}

TEST_CASE("every message but hello and hello_reply starts with its request id", "[wire]") {
  CHECK(leading_request_id(MsgType::result, encode(ResultMsg{0x0102030405060708})) == 0x0102030405060708u);
  CHECK(leading_request_id(MsgType::invoke, Bytes{1, 0, 0, 0, 0, 0, 0, 0, 9}) == 1u);
  CHECK(leading_request_id(MsgType::hello, Bytes(16, 1)) == std::nullopt);
  CHECK(leading_request_id(MsgType::hello_reply, Bytes(16, 1)) == std::nullopt);
  CHECK(leading_request_id(MsgType::list, Bytes(7, 1)) == std::nullopt);
}

TEST_CASE("hello and hello_reply round-trip", "[wire]") {
  auto h = decode_hello(encode(Hello{1, 3, Bytes{1, 2, 3}}));
  REQUIRE(h.ok());
  CHECK(h->min_version == 1);
  CHECK(h->max_version == 3);
  CHECK(h->reply_address == Bytes{1, 2, 3});
  // A version 1 hello (16 bytes, no address) still decodes, so it can be answered.
  check_strict(encode(Hello{1, 2, Bytes(100, 7)}), decode_hello, 16);
  auto v1 = decode_hello(ByteView(encode(Hello{1, 1, {}})).first(16));
  REQUIRE(v1.ok());
  CHECK(v1->reply_address.empty());
  CHECK_FALSE(decode_hello(encode(Hello{1, 2, Bytes(kMaxAddress + 1, 7)})).ok());
  Bytes bad = encode(Hello{});
  bad[0] = 'Y';
  CHECK_FALSE(decode_hello(bad).ok());
  CHECK_FALSE(decode_hello(encode(Hello{3, 1})).ok());
  // Version 3: the client's nonce follows the address; without it a version 3 hello is short.
  Hello v3{3, 3, Bytes{5}, {}};
  v3.nonce[31] = 0xaa;
  auto d3 = decode_hello(encode(v3));
  REQUIRE(d3.ok());
  CHECK(d3->nonce == v3.nonce);
  check_strict(encode(v3), decode_hello, 16);

  HelloReply r{1, ReplyStatus::ok, 2, 4, 1 << 20, 1 << 16, 1 << 24, "xcargo-loader 0.1.0"};
  auto rr = decode_hello_reply(encode(r));
  REQUIRE(rr.ok());
  CHECK(rr->node_id == 2);
  CHECK(rr->node_count == 4);
  CHECK(rr->max_reply == 1u << 24);
  CHECK(rr->loader_version == "xcargo-loader 0.1.0");
  CHECK(rr->auth == AuthMode::none);
  check_strict(encode(r), decode_hello_reply);
  r.auth = AuthMode::required;
  r.nonce[0] = 1;
  r.node_key[1] = 2;
  r.node_sig[2] = 3;
  rr = decode_hello_reply(encode(r));
  REQUIRE(rr.ok());
  CHECK(rr->auth == AuthMode::required);
  CHECK((rr->nonce == r.nonce && rr->node_key == r.node_key && rr->node_sig == r.node_sig));
  Bytes bad_mode = encode(r);
  bad_mode[bad_mode.size() - 128 - 8] = 3;  // the auth field: no such mode
  CHECK_FALSE(decode_hello_reply(bad_mode).ok());
}

TEST_CASE("push, has and their replies round-trip", "[wire]") {
  auto p = decode_push(encode(Push{7, 12345}));
  REQUIRE(p.ok());
  CHECK(p->request_id == 7);
  CHECK(p->cargo_size == 12345);
  check_strict(encode(Push{7, 1}), decode_push);

  PushReply pr;
  pr.request_id = 9, pr.status = ReplyStatus::refused, pr.error_kind = ErrorKind::untrusted, pr.digest = some_digest();
  pr.jit_compiled = true, pr.variant = "bitcode", pr.message = "no signature by a trusted key";
  auto prr = decode_push_reply(encode(pr));
  REQUIRE(prr.ok());
  CHECK(prr->status == ReplyStatus::refused);
  CHECK(prr->error_kind == ErrorKind::untrusted);
  CHECK(prr->digest == some_digest());
  CHECK(prr->jit_compiled);
  CHECK_FALSE(prr->already_loaded);
  CHECK(prr->message == pr.message);
  check_strict(encode(pr), decode_push_reply);

  check_strict(encode(Has{3, some_digest()}), decode_has);
  check_strict(encode(HasReply{3, true}), decode_has_reply);
  Bytes two = encode(HasReply{3, true});
  two[8] = 2;
  CHECK_FALSE(decode_has_reply(two).ok());
}

TEST_CASE("invoke and result round-trip", "[wire]") {
  Invoke inv{11, some_digest(), "sgemm_run", 1 << 20, 2500};
  auto i = decode_invoke(encode(inv));
  REQUIRE(i.ok());
  CHECK(i->entry == "sgemm_run");
  CHECK(i->input_size == 1u << 20);
  CHECK(i->timeout_ms == 2500);
  check_strict(encode(inv), decode_invoke);
  {  // timeout_ms where servers read it before decoding, and its reserved word checked
    Bytes b = encode(inv);
    CHECK(b[kInvokeTimeoutOffset] == (2500 & 0xff));
    CHECK(b[kInvokeTimeoutOffset + 1] == (2500 >> 8));
    b[kInvokeTimeoutOffset + 4] = uint8_t(kInvokeLog);
    auto logged = decode_invoke(b);
    REQUIRE(logged.ok());
    CHECK(logged->flags == kInvokeLog);
    b[kInvokeTimeoutOffset + 4] = 2;  // a flag this version does not know
    CHECK_FALSE(decode_invoke(b).ok());
  }
  {  // a result's log: the first kMaxLogLines, each cut to kMaxLogLine bytes, control characters sent as '?'
    ResultMsg m{7, ReplyStatus::ok, 0, 0, 0, 0, 0, "x86_64", ""};
    for (int k = 0; k < 20; ++k) m.log.push_back("line " + std::to_string(k) + (k == 0 ? std::string(300, 'x') : "\x1b[31m"));
    m.log_dropped = 3;
    auto d = decode_result(encode(m));
    REQUIRE(d.ok());
    REQUIRE(d->log.size() == kMaxLogLines);
    CHECK(d->log[0].size() == kMaxLogLine);
    CHECK(d->log[1] == "line 1?[31m");
    CHECK(d->log_dropped == 3 + 20 - kMaxLogLines);
    check_strict(encode(m), decode_result);
  }
  CHECK_FALSE(decode_invoke(encode(Invoke{1, {}, "", 0})).ok());
  CHECK_FALSE(decode_invoke(encode(Invoke{1, {}, std::string(65, 'a'), 0})).ok());

  ResultMsg res{11, ReplyStatus::kernel_error, -3, 8, 2, 5, 1234, "x86_64", "the kernel returned -3"};
  auto r = decode_result(encode(res));
  REQUIRE(r.ok());
  CHECK(r->status == ReplyStatus::kernel_error);
  CHECK(r->kernel_return == -3);
  CHECK(r->node_id == 2);
  CHECK(r->hops == 5);
  CHECK(r->kernel_ns == 1234);
  CHECK(r->variant == "x86_64");
  check_strict(encode(res), decode_result);
  Bytes unknown = encode(res);
  unknown[8] = 99;
  CHECK_FALSE(decode_result(unknown).ok());
}

TEST_CASE("a result decoded into a kept message holds that result alone, in the message's storage", "[wire]") {
  ResultMsg kept{7, ReplyStatus::kernel_error, -3, 8, 2, 5, 1234, std::string(40, 'v'), std::string(300, 'm')};
  const char* storage = kept.message.data();
  const ResultMsg ok{11, ReplyStatus::ok, 0, 8, 1, 0, 99, "x86_64", "short"};
  REQUIRE(decode_result_into(encode(ok), kept).ok());
  CHECK(encode(kept) == encode(ok));
  CHECK(kept.message.data() == storage);
  Bytes bad = encode(ok);
  bad[8] = 99;  // an unknown status
  CHECK_FALSE(decode_result_into(bad, kept).ok());
  Bytes truncated = encode(ok);
  truncated.pop_back();
  CHECK_FALSE(decode_result_into(truncated, kept).ok());
}

TEST_CASE("results encoded one after another from the last one's bytes are encode's bytes", "[wire]") {
  ResultEncoder enc;
  Bytes out(500, 0xEE);  // a longer message's bytes: none of them may show
  const uint8_t* storage = out.data();
  ResultMsg m{1, ReplyStatus::ok, 0, 8, 2, 0, 1234, "x86_64", ""};
  auto same = [&](const ResultMsg& r) {
    enc.encode(r, out);
    CHECK(out == encode(r));
    CHECK(out.data() == storage);
  };
  same(m);
  for (uint64_t i = 2; i < 6; ++i) {  // the fields that change from run to run
    m.request_id = i * 0x0102030405060708ull;
    m.kernel_return = -int32_t(i);
    m.output_size = i << 33;
    m.kernel_ns = i * 77;
    same(m);
  }
  // Any other field: encoded afresh, and remembered from then on.
  m.variant = "x86_64-v3", same(m);
  m.message = "the kernel returned -5", m.status = ReplyStatus::kernel_error, same(m);
  m.status = ReplyStatus::refused, same(m);
  m.hops = 3, same(m);
  m.node_id = 9, same(m);
  m.message.clear(), m.status = ReplyStatus::ok, same(m);
  m.request_id = 99, same(m);
}

TEST_CASE("forwards encoded one after another from the last one's bytes are encode's bytes", "[wire]") {
  ForwardEncoder enc;
  Bytes out;
  Forward f{7, some_digest(), 1, 2, 0, 64, "walk", Bytes(160, 0xA5)};
  auto same = [&](const Forward& m) {
    enc.encode(m, out);
    CHECK(out == encode(m));
  };
  same(f);
  for (uint32_t hop = 2; hop < 2000; hop += 397) f.hop = hop, same(f);
  f.request_id = 8, same(f);
  f.from_node = 0, same(f);
  f.input_size = 72, same(f);
  f.cargo_size = 3000, same(f);
  f.entry = "walk2", same(f);
  f.reply_address.back() ^= 1, same(f);
  f.digest[31] ^= 1, same(f);
  f.hop = 5, same(f);
}

TEST_CASE("invoke and result headers encoded into a kept buffer are the same bytes, in its storage", "[wire]") {
  const Invoke inv{11, some_digest(), "sgemm_run", 1 << 20};
  const ResultMsg res{11, ReplyStatus::ok, 0, 8, 2, 0, 1234, "x86_64", ""};
  Bytes kept(300, 0xEE);  // an earlier, longer message's bytes: none of them may show
  const uint8_t* storage = kept.data();
  Bytes h = encode(inv, std::move(kept));
  CHECK(h == encode(inv));
  CHECK(h.data() == storage);
  Bytes r = encode(res, std::move(h));
  CHECK(r == encode(res));
  CHECK(r.data() == storage);
  CHECK(encode(res, Bytes()) == encode(res));
}

TEST_CASE("forward round-trips and is checked", "[wire]") {
  Forward f{21, some_digest(), 3, 1, 4096, 16, "walk", Bytes(300, 9)};
  auto d = decode_forward(encode(f));
  REQUIRE(d.ok());
  CHECK(d->request_id == 21);
  CHECK(d->digest == some_digest());
  CHECK(d->hop == 3);
  CHECK(d->from_node == 1);
  CHECK(d->cargo_size == 4096);
  CHECK(d->input_size == 16);
  CHECK(d->entry == "walk");
  CHECK(d->reply_address == Bytes(300, 9));
  check_strict(encode(f), decode_forward);
  Forward hop0 = f;
  hop0.hop = 0;
  CHECK_FALSE(decode_forward(encode(hop0)).ok());
  Forward overflow = f;
  overflow.cargo_size = UINT64_MAX;
  CHECK_FALSE(decode_forward(encode(overflow)).ok());
  Forward big = f;
  big.reply_address = Bytes(kMaxAddress + 1, 1);
  CHECK_FALSE(decode_forward(encode(big)).ok());
  Forward noentry = f;
  noentry.entry.clear();
  CHECK_FALSE(decode_forward(encode(noentry)).ok());
}

TEST_CASE("listings and counters round-trip", "[wire]") {
  Listing list;
  list.cargos = {{some_digest(), 42, "hello", "0.1.0", "x86_64", {"bitcode", "x86_64"}, {"add", "greet"}},
                 {Digest{}, 0, "empty", "1", "bitcode", {}, {}}};
  list.regions = {{"chase", 1 << 20}};
  list.triple = "aarch64-unknown-linux-gnu";
  list.cpu = "generic";
  list.prefer = "native";
  auto l = decode_listing(encode_listing(list));
  REQUIRE(l.ok());
  REQUIRE(l->cargos.size() == 2);
  CHECK(l->cargos[0].invocations == 42);
  CHECK(l->cargos[0].entries == std::vector<std::string>{"add", "greet"});
  REQUIRE(l->regions.size() == 1);
  CHECK(l->regions[0].name == "chase");
  CHECK(l->regions[0].length == 1u << 20);
  CHECK(l->triple == "aarch64-unknown-linux-gnu");
  CHECK(l->cpu == "generic");
  CHECK(l->prefer == "native");
  Listing hostile = list;  // a node's text never reaches a terminal as control characters
  hostile.triple = "\x1b[31mPWNED\x1b[0m\nforged";
  hostile.cpu = "a\xc2\x9b" "2Jb\x7f";
  auto h = decode_listing(encode_listing(hostile));  // sent as '?'
  REQUIRE(h.ok());
  CHECK(h->triple == "?[31mPWNED?[0m?forged");
  CHECK(h->cpu == "a??2Jb?");
  hostile.cpu = "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80";  // other UTF-8 stays
  CHECK(decode_listing(encode_listing(hostile))->cpu == "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
  // Bytes that are not UTF-8 (a lone 0x9B is an 8-bit terminal's CSI; overlong forms; a
  // surrogate; a sequence cut short) are sent as '?', each byte.
  hostile.cpu = "a\x9b" "31mX\xff" "b\xc0\xaf\xed\xa0\x80\xe2\x82";
  CHECK(decode_listing(encode_listing(hostile))->cpu == "a?31mX?b???????");
  hostile.cpu = "abc";
  Bytes raw = encode_listing(hostile);  // and a peer that sends one anyway is refused
  raw[raw.size() - 2 - 6 - 3] = 0x1b;   // cpu's first byte ("native" and its length follow)
  auto refused = decode_listing(raw);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().message().find("control character") != std::string::npos);
  raw[raw.size() - 2 - 6 - 3] = 0x9b;  // and one that is not UTF-8
  CHECK_FALSE(decode_listing(raw).ok());
  Bytes no_node = encode_listing(list);  // a version 3 listing: no node record
  no_node.resize(no_node.size() - (2 + 25 + 2 + 7 + 2 + 6));
  CHECK_FALSE(decode_listing(no_node).ok());
  check_strict(encode_listing(list), decode_listing);
  Bytes huge_count = encode_listing({});
  huge_count[3] = 0x7f;
  CHECK_FALSE(decode_listing(huge_count).ok());
  Bytes huge_regions = encode_listing({});
  huge_regions[7] = 0x7f;
  CHECK_FALSE(decode_listing(huge_regions).ok());

  RegionReply rr{5, ReplyStatus::ok, 0x7f0000001000, 4096, Bytes(40, 3)};
  auto d = decode_region_reply(encode(rr));
  REQUIRE(d.ok());
  CHECK(d->address == 0x7f0000001000);
  CHECK(d->length == 4096);
  CHECK(d->rkey == Bytes(40, 3));
  check_strict(encode(rr), decode_region_reply);
  check_strict(encode(RegionQuery{5, "chase"}), decode_region);
  CHECK_FALSE(decode_region(encode(RegionQuery{5, ""})).ok());
  RegionReply no_key{6, ReplyStatus::ok, 0, 4096, {}};  // a node without one-sided reads
  auto nk = decode_region_reply(encode(no_key));
  REQUIRE(nk.ok());
  CHECK(nk->rkey.empty());
  CHECK(nk->length == 4096);

  Auth a{9, {}, {}};
  a.client_key[0] = 1;
  a.signature[63] = 2;
  auto ad = decode_auth(encode(a));
  REQUIRE(ad.ok());
  CHECK(ad->client_key == a.client_key);
  CHECK(ad->signature == a.signature);
  check_strict(encode(a), decode_auth);
  AuthReply ar{9, ReplyStatus::unauthenticated, 4, {}, "no such key"};
  ar.token[15] = 7;
  auto ard = decode_auth_reply(encode(ar));
  REQUIRE(ard.ok());
  CHECK(ard->status == ReplyStatus::unauthenticated);
  CHECK(ard->verbs == 4);
  CHECK(ard->message == "no such key");
  CHECK(ard->token == ar.token);
  check_strict(encode(ar), decode_auth_reply);

  LaneOffer lo{11, ReplyStatus::ok, 123456, {}, ""};
  lo.nonce[0] = 1;
  lo.nonce[15] = 9;
  auto lod = decode_lane_offer(encode(lo));
  REQUIRE(lod.ok());
  CHECK(lod->request_id == 11);
  CHECK(lod->shm_id == 123456);
  CHECK(lod->nonce == lo.nonce);
  check_strict(encode(lo), decode_lane_offer);
  CHECK(decode_lane_offer(encode(LaneOffer{11, ReplyStatus::limit, -1, {}, "no lane to spare"}))->shm_id == -1);

  // A relay (4.13): the result's header whole; and the relay address a TLS client gets.
  Relay rl{0x1122334455667788, encode(ResultMsg{})};
  auto rld = decode_relay(encode(rl));
  REQUIRE(rld.ok());
  CHECK(rld->relay_id == rl.relay_id);
  CHECK(rld->result == rl.result);
  check_strict(encode(rl), decode_relay);
  const Bytes ra = encode(RelayAddress{7, 0xA5A5});
  CHECK(ra.size() == kRelayAddressSize);
  REQUIRE(relay_address_of(ra));
  CHECK(relay_address_of(ra)->node_id == 7);
  CHECK(relay_address_of(ra)->relay_id == 0xA5A5);
  CHECK_FALSE(relay_address_of(encode(RelayAddress{7, 0})));  // id 0 names no connection
  Bytes other = ra;
  other[0] ^= 1;
  CHECK_FALSE(relay_address_of(other));  // a UCX address, however short
  other = ra;
  other.push_back(0);
  CHECK_FALSE(relay_address_of(other));

  RegionRead rd{7, 4080, 16, "chase"};
  auto r = decode_region_read(encode(rd));
  REQUIRE(r.ok());
  CHECK(r->offset == 4080);
  CHECK(r->length == 16);
  CHECK(r->name == "chase");
  check_strict(encode(rd), decode_region_read);
  CHECK_FALSE(decode_region_read(encode(RegionRead{7, 0, 16, ""})).ok());
  RegionData data{7, ReplyStatus::out_of_range, 0};
  auto dd = decode_region_data(encode(data));
  REQUIRE(dd.ok());
  CHECK(dd->status == ReplyStatus::out_of_range);
  check_strict(encode(data), decode_region_data);
  Bytes unknown_status = encode(data);
  unknown_status[8] = uint8_t(kMaxStatus + 1);
  CHECK_FALSE(decode_region_data(unknown_status).ok());

  std::vector<Counter> counters = {{"invocations", 10}, {"jit_compiles", 0}};
  auto c = decode_counters(encode_counters(counters));
  REQUIRE(c.ok());
  CHECK((*c)[0].name == "invocations");
  CHECK((*c)[0].value == 10);
  check_strict(encode_counters(counters), decode_counters);
}

TEST_CASE("frames carry a header and data and check their lengths", "[wire]") {
  Bytes header = encode(Push{1, 3});
  Bytes data = {1, 2, 3};
  Bytes f = encode_frame(MsgType::push, header, data);
  size_t used = 0;
  auto fr = decode_frame(f, 1 << 20, &used);
  REQUIRE(fr.ok());
  CHECK(fr->type == MsgType::push);
  CHECK(fr->header == header);
  CHECK(fr->data == data);
  CHECK(used == f.size());
  for (size_t n = 0; n < f.size(); ++n) CHECK_FALSE(decode_frame(ByteView(f).first(n), 1 << 20).ok());
  CHECK(decode_frame(f, 2).error().code() == Errc::limit);
  Bytes bad_type = f;
  bad_type[0] = 0;
  CHECK_FALSE(decode_frame(bad_type, 1 << 20).ok());
}
