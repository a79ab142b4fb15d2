// Tests of the handler on a real engine: a kernel that replies with its own input is sent
// the input's buffer, not a copy, when its caller gives the buffer up; an invoke header is
// decoded once for the calls that repeat it, a forward's for the hops that repeat it.
#include <catch2/catch.hpp>

#include <fstream>

#include "built_cargo.h"
#include "server/handler.h"
#include "engine/runtime.h"
#include "support.h"
#include "xcargo/cargo.h"

using namespace xcargo;
using namespace xcargo::loader;

namespace {

constexpr const char* kEchoes = R"(#include <xcargo/kernel.h>
XC_ENTRY int echo(xc_ctx *ctx, const void *in, size_t n) { return xc_reply(ctx, in, n); }
XC_ENTRY int half(xc_ctx *ctx, const void *in, size_t n) { return xc_reply(ctx, in, n / 2); }
XC_ENTRY int tail(xc_ctx *ctx, const void *in, size_t n) { return xc_reply(ctx, (const char *)in + 1, n - 1); }
XC_ENTRY int twice(xc_ctx *ctx, const void *in, size_t n) {
  if (xc_reply(ctx, in, n) != 0) return 1;
  return xc_reply(ctx, in, 4);
}
XC_ENTRY int then_forward(xc_ctx *ctx, const void *in, size_t n) {
  if (xc_reply(ctx, in, n) != 0) return 1;
  return xc_forward(ctx, 1, "echo", in, 8) == -1 ? 0 : 2;
}
XC_ENTRY int onward(xc_ctx *ctx, const void *in, size_t n) { return xc_forward(ctx, 1, "echo", in, n) == 0 ? 0 : 1; }
)";

struct Echoes {
  test::ScratchDir dir;
  std::unique_ptr<Engine> engine;
  std::unique_ptr<Handler> handler;
  Digest digest{};

  Echoes() {
    std::ofstream(dir / "echoes.c") << kEchoes;
    const Bytes cargo = test::build_cargo(dir, dir / "echoes.c");
    EngineConfig c;
    c.node_count = 2;  // xc_forward is allowed
    c.max_forward_input = 1 << 20;
    c.max_reply = 64 << 20;
    auto e = Engine::create(c, test::vector_trust());
    REQUIRE(e.ok());
    engine = std::move(*e);
    handler = std::make_unique<Handler>(*engine, 64 << 20, [](std::string_view) {});
    auto loaded = engine->load(cargo);
    REQUIRE(loaded.ok());
    digest = loaded->digest;
  }

  // The step of an invoke of entry with input; owned: input's own buffer, or null.
  Step invoke(const std::string& entry, ByteView input, Bytes* owned, uint64_t id = 7) {
    wire::Invoke inv;
    inv.request_id = id;
    inv.digest = digest;
    inv.entry = entry;
    inv.input_size = input.size();
    std::optional<Step> s = handler->invoke(wire::encode(inv), input, {}, false, owned);
    REQUIRE(s);
    auto r = wire::decode_result(s->reply.header);
    REQUIRE(r.ok());
    CHECK(r->request_id == id);
    CHECK(r->status == wire::ReplyStatus::ok);
    CHECK(r->output_size == s->reply.data.size());
    return std::move(*s);
  }
};

Bytes pattern(size_t n) {
  Bytes b(n);
  for (size_t i = 0; i < n; ++i) b[i] = uint8_t(i * 7 + (i >> 12));
  return b;
}

}  // namespace

TEST_CASE("a reply that is the kernel's own input is sent from the input's buffer", "[handler]") {
  Echoes t;
  const size_t n = size_t(1) << 20;
  REQUIRE(n >= kReplyFromInput);
  const Bytes want = pattern(n);

  SECTION("given the buffer, the reply takes it: the same bytes, no copy") {
    Bytes input = want;
    const uint8_t* where = input.data();
    Step s = t.invoke("echo", input, &input);
    CHECK(s.reply.data.data() == where);
    CHECK(s.reply.data == want);
    CHECK(input.empty());
  }
  SECTION("a prefix of the input is its first bytes, in the same buffer") {
    Bytes input = want;
    const uint8_t* where = input.data();
    Step s = t.invoke("half", input, &input);
    CHECK(s.reply.data.data() == where);
    CHECK(s.reply.data == Bytes(want.begin(), want.begin() + n / 2));
  }
  SECTION("a prefix under half of the buffer is copied: a reply holds no more than twice what it is charged for") {
    Bytes input = want;
    input.reserve(4 * n);  // as a pooled buffer larger than the input may be
    Step s = t.invoke("half", input, &input);
    CHECK(s.reply.data == Bytes(want.begin(), want.begin() + n / 2));
    CHECK(s.reply.data.capacity() < 2 * n);
    CHECK(input == want);  // still the caller's
  }
  SECTION("without the buffer (a lane's, or UCX's own), the reply is a copy") {
    Step s = t.invoke("echo", want, nullptr);
    CHECK(s.reply.data.data() != want.data());
    CHECK(s.reply.data == want);
  }
  SECTION("bytes past the input's start are copied; the buffer stays the caller's") {
    Bytes input = want;
    Step s = t.invoke("tail", input, &input);
    CHECK(s.reply.data == Bytes(want.begin() + 1, want.end()));
    CHECK(input == want);
  }
  SECTION("a second xc_reply appends to a copy of the first") {
    Bytes input = want;
    Step s = t.invoke("twice", input, &input);
    Bytes both = want;
    both.insert(both.end(), want.begin(), want.begin() + 4);
    CHECK(s.reply.data == both);
  }
  SECTION("a kernel that replied cannot forward, as before") {
    Bytes input = want;
    Step s = t.invoke("then_forward", input, &input);
    CHECK_FALSE(s.forward);
    CHECK(s.reply.data == want);
  }
  SECTION("a small input is copied, as every reply was") {
    const Bytes small = pattern(100);
    Bytes input = small;
    Step s = t.invoke("echo", input, &input);
    CHECK(s.reply.data == small);
    CHECK(input == small);
  }
}

TEST_CASE("a repeated invoke header is decoded once, and only the same bytes count as the same call", "[handler]") {
  Echoes t;
  const Bytes in = pattern(kReplyFromInput);
  CHECK(t.invoke("echo", in, nullptr, 1).reply.data == in);
  CHECK(t.invoke("echo", in, nullptr, 2).reply.data == in);  // the id is the new one (checked in invoke)
  CHECK(t.invoke("half", in, nullptr, 3).reply.data.size() == in.size() / 2);
  const Bytes shorter(in.begin(), in.end() - 1);
  CHECK(t.invoke("half", shorter, nullptr, 4).reply.data.size() == shorter.size() / 2);  // input_size differs
  // A header that is the last one's with a byte more, or cut short, is decoded, and refused.
  wire::Invoke inv;
  inv.request_id = 5;
  inv.digest = t.digest;
  inv.entry = "half";
  inv.input_size = shorter.size();
  Bytes header = wire::encode(inv);
  for (Bytes bad : {Bytes(header.begin(), header.end() - 1), [&] { Bytes b = header; b.push_back(0); return b; }()}) {
    std::optional<Step> s = t.handler->invoke(bad, shorter, {}, false);
    REQUIRE(s);
    auto r = wire::decode_result(s->reply.header);
    REQUIRE(r.ok());
    CHECK(r->status == wire::ReplyStatus::bad_request);
  }
  CHECK(t.invoke("half", shorter, nullptr, 6).reply.data.size() == shorter.size() / 2);
  // Another cargo's digest in the same place: not the remembered call.
  inv.digest[0] ^= 1;
  std::optional<Step> s = t.handler->invoke(wire::encode(inv), shorter, {}, false);
  REQUIRE(s);
  auto r = wire::decode_result(s->reply.header);
  REQUIRE(r.ok());
  CHECK(r->status == wire::ReplyStatus::not_loaded);
}

TEST_CASE("a forward header is remembered but for its id and hop; any other byte is decoded afresh", "[handler]") {
  Echoes t;
  const Bytes in = pattern(16);
  wire::Forward f;
  f.request_id = 11;
  f.digest = t.digest;
  f.hop = 1;
  f.from_node = 1;
  f.input_size = in.size();
  f.entry = "echo";
  f.reply_address = Bytes(40, 0xA1);
  // The result of one forward (to its client, by address) and the step.
  auto result = [&](const wire::Forward& m, Step* step = nullptr) {
    std::optional<Step> s = t.handler->forward(wire::encode(m), in, false);
    REQUIRE(s);
    if (step) *step = *s;
    REQUIRE(s->send_reply);
    CHECK(s->reply_to == m.reply_address);
    CHECK(s->came_from == m.from_node);
    auto r = wire::decode_result(s->reply.header);
    REQUIRE(r.ok());
    CHECK(r->request_id == m.request_id);
    CHECK(r->hops == m.hop);
    CHECK(s->reply.data == in);
    return *r;
  };
  CHECK(result(f).status == wire::ReplyStatus::ok);
  f.request_id = 12, f.hop = 7;  // the remembered header, another id and hop
  CHECK(result(f).status == wire::ReplyStatus::ok);
  f.from_node = 0;  // a byte after the hop
  CHECK(result(f).status == wire::ReplyStatus::ok);
  f.reply_address[39] = 0xB2;  // the client's address, same length
  CHECK(result(f).status == wire::ReplyStatus::ok);
  // Hop 0 with every other byte the remembered one's: refused, as a decode refuses it.
  f.hop = 0;
  std::optional<Step> s = t.handler->forward(wire::encode(f), in, false);
  REQUIRE(s);
  CHECK_FALSE(s->send_reply);
  f.hop = 3;
  CHECK(result(f).status == wire::ReplyStatus::ok);
  // A forward onward carries this hop plus one and the client's address.
  f.entry = "onward";
  std::optional<Step> on = t.handler->forward(wire::encode(f), in, false);
  REQUIRE(on);
  REQUIRE(on->forward);
  CHECK(on->forward->hop == 4);
  CHECK(on->forward->request_id == f.request_id);
  CHECK(on->forward->reply_address == f.reply_address);
  f.hop = 9;
  on = t.handler->forward(wire::encode(f), in, false);
  REQUIRE(on);
  REQUIRE(on->forward);
  CHECK(on->forward->hop == 10);
}

TEST_CASE("invocations are counted in the node's counters, by cargo and client key, answered by the server too", "[handler]") {
  Echoes t;
  auto fd = NodeStats::create_memory();
  REQUIRE(fd.ok());
  auto stats = NodeStats::open(*fd, true);
  REQUIRE(stats.ok());
  (*stats)->begin_serving();
  t.handler->set_node_stats(stats->get());
  const std::string who = "from 127.0.0.1:4000 key 00c0ffee00c0ffee (ci)";
  {
    RequestOrigin origin(&who);
    const Bytes in = pattern(16);
    for (int i = 0; i < 3; ++i) t.invoke("echo", in, nullptr);
    wire::Invoke inv;
    inv.digest = t.digest;
    inv.entry = "missing";
    inv.input_size = 4;
    REQUIRE(t.handler->invoke(wire::encode(inv), pattern(4), {}, false));
    t.handler->count_answer(wire::MsgType::invoke, wire::encode(inv), wire::ReplyStatus::crashed);
  }
  const StatsSnapshot s = (*stats)->snapshot();
  CHECK(s.total.invocations == 5);
  CHECK(s.total.by_status[size_t(wire::ReplyStatus::no_entry)] == 1);
  CHECK(s.total.by_status[size_t(wire::ReplyStatus::crashed)] == 1);
  CHECK(s.total.bytes_in == 3 * 16 + 4 + 4);
  CHECK(s.total.bytes_out == 3 * 16);
  CHECK(s.running == 0);
  REQUIRE(s.cargos.size() == 1);
  CHECK(s.cargos[0].value == to_hex(ByteView(t.digest).first(8)) + " echoes");
  CHECK(s.cargos[0].counts.invocations == 5);
  REQUIRE(s.clients.size() == 1);
  CHECK(s.clients[0].value == "00c0ffee00c0ffee");
  ::close(*fd);
}
