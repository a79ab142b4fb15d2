// The server's parts (server_impl.h) driven through a fake transport, on a real engine: a
// client's handshake and invocations go through intake to the executors (queued, or run
// inline) and its results come back; a forward to a node that cannot be reached tells its
// client `unreachable` through its relay address; what waits when the worker ends in order
// is answered `restarting`; a client that does not read its replies is closed; requests
// through a shared-memory lane are answered there, with a kick for a client that sleeps.
#include <catch2/catch.hpp>

#include <condition_variable>
#include <deque>
#include <fstream>
#include <mutex>
#include <set>

#include "built_cargo.h"
#include "keys/node_key.h"
#include "server/server_impl.h"
#include "support.h"
#include "auth/auth.h"
#include "wire/lane.h"

using namespace xcargo;
using namespace xcargo::loader;
using namespace xcargo::wire;
using namespace std::chrono_literals;

namespace {

constexpr const char* kKernels = R"(#include <xcargo/kernel.h>
XC_ENTRY int echo(xc_ctx *ctx, const void *in, size_t n) { return xc_reply(ctx, in, n); }
XC_ENTRY int onward(xc_ctx *ctx, const void *in, size_t n) { return xc_forward(ctx, 1, "echo", in, n) == 0 ? 0 : 1; }
)";

struct Msg {
  Ep ep;
  MsgType type{};
  Bytes header, data;
};

// A transport in memory: the connections a test opens and the messages it puts in reach the
// server inside poll(), on the leader's thread, as UCX's callbacks do; what the server sends
// is kept for the test.
struct FakeTransport final : Transport, Sleeper {
  std::function<void(Ep)> accept;     // the server's table of connections
  std::function<void(Msg&)> deliver;  // the server's intake
  std::string over_limit;             // unread_over_limit's answer
  mutable std::mutex mu;
  std::condition_variable cv;
  std::deque<Msg> inbox;  // a message of type 0: a new connection
  std::vector<Msg> sent;
  std::set<Ep> closed;
  bool woken = false, listening = true;

  std::string unread_over_limit(Ep, const Client&, uint64_t) const override { return over_limit; }
  void send(Ep ep, Reply&& r, Client*) override { keep(ep, std::move(r)); }
  void send_peer(Ep ep, Reply&& r, Failed) override { keep(ep, std::move(r)); }
  void close(Ep ep) override {
    std::lock_guard<std::mutex> l(mu);
    closed.insert(ep);
    cv.notify_all();
  }
  bool poll() override {
    std::deque<Msg> in;
    {
      std::lock_guard<std::mutex> l(mu);
      in.swap(inbox);
    }
    for (Msg& m : in) m.type == MsgType{} ? accept(m.ep) : deliver(m);
    return !in.empty();
  }
  bool sending() const override { return false; }
  void stop_listening() override { listening = false; }
  void wait(int ms) override {
    if (poll()) return;
    std::unique_lock<std::mutex> l(mu);
    cv.wait_for(l, std::chrono::milliseconds(ms), [&] { return woken || !inbox.empty(); });
    woken = false;
  }
  void wake() override {
    std::lock_guard<std::mutex> l(mu);
    woken = true;
    cv.notify_all();
  }

  void put(Ep ep, MsgType type, Bytes header, Bytes data = {}) {
    std::lock_guard<std::mutex> l(mu);
    inbox.push_back({ep, type, std::move(header), std::move(data)});
    cv.notify_all();
  }
  // The first message sent to ep since the last taken, waiting for it up to 20 s (a
  // ceiling: it comes within milliseconds).
  Msg take(Ep ep) {
    std::unique_lock<std::mutex> l(mu);
    auto first = [&] { return std::find_if(sent.begin(), sent.end(), [&](const Msg& m) { return m.ep == ep; }); };
    REQUIRE(cv.wait_for(l, 20s, [&] { return first() != sent.end(); }));
    Msg m = std::move(*first());
    sent.erase(first());
    return m;
  }
  // Whether ep is closed within 20 s (a ceiling).
  bool closes(Ep ep) {
    std::unique_lock<std::mutex> l(mu);
    return cv.wait_for(l, 20s, [&] { return closed.count(ep) > 0; });
  }
  size_t count_sent() const {
    std::lock_guard<std::mutex> l(mu);
    return sent.size();
  }

private:
  void keep(Ep ep, Reply&& r) {
    std::lock_guard<std::mutex> l(mu);
    sent.push_back({ep, r.type, std::move(r.header), std::move(r.data)});
    cv.notify_all();
  }
};

SigningKey new_key() {
  auto k = SigningKey::generate();
  REQUIRE(k.ok());
  return std::move(*k);
}

std::optional<auth::AuthorizedKeys> clients(const SigningKey& k) {
  auth::AuthorizedKeys keys;
  keys.add({k.public_key(), auth::kAllClientVerbs, "alice"});
  return keys;
}

ResultMsg result_of(const Msg& m) {
  REQUIRE(m.type == MsgType::result);
  auto r = decode_result(m.header);
  REQUIRE(r.ok());
  return *r;
}

// A worker's serving state on a real engine, with the fake as its only transport.
struct Worker {
  test::ScratchDir dir;
  std::unique_ptr<Engine> engine;
  std::unique_ptr<Handler> handler;
  Digest digest{};
  SigningKey client_key = new_key();
  AuthGate gate;
  FakeTransport* fake = nullptr;
  UcxServer::Impl m;
  std::thread leader;
  std::mutex log_mu;
  std::vector<std::string> lines;

  explicit Worker(bool inline_quick) : gate(std::make_shared<keys::HeldKey>(new_key()), clients(client_key)) {
    std::ofstream(dir / "kernels.c") << kKernels;
    const Bytes cargo = test::build_cargo(dir, dir / "kernels.c");
    EngineConfig c;
    c.node_count = 2;  // xc_forward may name node 1, which no cluster file places
    c.max_forward_input = 1 << 20;
    auto e = Engine::create(c, test::vector_trust());
    REQUIRE(e.ok());
    engine = std::move(*e);
    handler = std::make_unique<Handler>(*engine, 1 << 20, [](std::string_view) {});
    auto loaded = engine->load(cargo);
    REQUIRE(loaded.ok());
    digest = loaded->digest;

    m.opt.gate = &gate;
    m.opt.executors = 1;
    m.opt.inline_quick = inline_quick;
    m.handler = handler.get();
    m.log = [this](std::string_view l) {
      std::lock_guard<std::mutex> g(log_mu);
      lines.emplace_back(l);
    };
    auto f = std::make_unique<FakeTransport>();
    fake = f.get();
    fake->accept = [this](Ep ep) { m.eps.add(ep, "10.0.0.9:4000", Clock::now()); };
    fake->deliver = [this](Msg& x) {
      m.intake(x.type, x.ep, x.header.data(), x.header.size(), x.data.data(), x.data.size(), false);
    };
    m.sleeper = fake;
    m.ucx_transport = std::move(f);
    m.init_parts();
    m.served = true;
    install_fault_handlers();
  }
  ~Worker() {
    stop();
    handler->on_load({});
  }
  void start() {
    leader = std::thread([this] { m.executor(*m.slots[0]); });
  }
  void stop() {
    if (!leader.joinable()) return;
    m.stop_threads();
    leader.join();
  }
  bool logged(const std::string& part) {
    std::lock_guard<std::mutex> g(log_mu);
    return std::any_of(lines.begin(), lines.end(), [&](const std::string& l) { return l.find(part) != std::string::npos; });
  }

  // A connection that says hello and proves the client's key (the leader running): its token.
  SessionToken connect(Ep ep) {
    fake->put(ep, MsgType{}, {});  // the connection, made on the leader's thread
    Hello h;
    auto n = auth::random_nonce();
    REQUIRE(n.ok());
    h.nonce = *n;
    fake->put(ep, MsgType::hello, encode(h));
    const Msg hr_msg = fake->take(ep);
    REQUIRE(hr_msg.type == MsgType::hello_reply);
    auto hr = decode_hello_reply(hr_msg.header);
    REQUIRE(hr.ok());
    Auth a;
    a.request_id = 1;
    a.client_key = client_key.public_key().raw;
    auto sig = client_key.sign(auth::client_proof(h.nonce, hr->nonce, hr->node_key, client_key.public_key().raw));
    REQUIRE(sig.ok());
    a.signature = *sig;
    fake->put(ep, MsgType::auth, encode(a));
    const Msg ar_msg = fake->take(ep);
    auto ar = decode_auth_reply(ar_msg.header);
    REQUIRE(ar.ok());
    REQUIRE(ar->status == ReplyStatus::ok);
    return ar->token;
  }
  static Bytes invoke_header(const Digest& digest, const SessionToken& token, uint64_t id, const std::string& entry,
                             size_t input_size) {
    Invoke inv;
    inv.request_id = id;
    inv.digest = digest;
    inv.entry = entry;
    inv.input_size = input_size;
    Bytes h = encode(inv);
    h.insert(h.end(), token.begin(), token.end());
    return h;
  }
  void invoke(Ep ep, const SessionToken& token, uint64_t id, const std::string& entry, const std::string& input) {
    Invoke inv;
    inv.request_id = id;
    inv.digest = digest;
    inv.entry = entry;
    inv.input_size = input.size();
    Bytes h = encode(inv);
    h.insert(h.end(), token.begin(), token.end());
    fake->put(ep, MsgType::invoke, std::move(h), Bytes(input.begin(), input.end()));
  }
};

Ep ep(uintptr_t n) { return reinterpret_cast<ucp_ep*>(n); }

}  // namespace

TEST_CASE("a client's invocations go through the server's parts and their results come back", "[server]") {
  for (const bool inline_quick : {false, true}) {
    INFO("inline_quick " << inline_quick);
    Worker w(inline_quick);
    w.start();
    const SessionToken token = w.connect(ep(1));
    for (uint64_t id = 10; id < 13; ++id) {
      const std::string input = "input " + std::to_string(id);
      w.invoke(ep(1), token, id, "echo", input);
      const Msg reply = w.fake->take(ep(1));
      const ResultMsg r = result_of(reply);
      CHECK(r.request_id == id);
      CHECK(r.status == ReplyStatus::ok);
      CHECK(std::string(reply.data.begin(), reply.data.end()) == input);
    }
    // A request without the session's token is dropped unanswered (Intake), and logged.
    Invoke bare;
    bare.request_id = 20;
    bare.digest = w.digest;
    bare.entry = "echo";
    w.fake->put(ep(1), MsgType::invoke, encode(bare));
    w.invoke(ep(1), token, 21, "echo", "after");
    CHECK(result_of(w.fake->take(ep(1))).request_id == 21);
    w.stop();
    CHECK(w.fake->count_sent() == 0);
    CHECK(w.logged("accepted client from 10.0.0.9:4000"));
  }
}

TEST_CASE("a forward to a node that cannot be reached tells its client unreachable, through its relay address", "[server]") {
  Worker w(false);
  w.start();
  const SessionToken token = w.connect(ep(1));
  w.invoke(ep(1), token, 30, "onward", "chain");
  const ResultMsg r = result_of(w.fake->take(ep(1)));
  CHECK(r.request_id == 30);
  CHECK(r.status == ReplyStatus::unreachable);
  CHECK(r.message.find("could not be forwarded to node 1") != std::string::npos);
  w.stop();
  CHECK(w.logged("failed forward:"));
}

TEST_CASE("requests waiting when the worker ends in order are answered restarting, not lost", "[server]") {
  Worker w(false);
  w.start();
  const SessionToken token = w.connect(ep(1));
  w.stop();  // no leader: what arrives now waits in the queue
  for (uint64_t id = 40; id < 43; ++id) w.invoke(ep(1), token, id, "echo", "late");
  CHECK(w.m.progress_all());  // as the leader's progress call: intake queues them
  CHECK(w.fake->count_sent() == 0);
  w.m.end_in_order();
  CHECK_FALSE(w.fake->listening);
  for (uint64_t id = 40; id < 43; ++id) {
    const ResultMsg r = result_of(w.fake->take(ep(1)));
    CHECK(r.request_id == id);
    CHECK(r.status == ReplyStatus::restarting);
  }
  CHECK(w.logged("answered 3 queued requests 'restarting'"));
}

TEST_CASE("a client past its limit of unread replies is closed, and its replies stop", "[server]") {
  Worker w(false);
  w.start();
  const SessionToken token = w.connect(ep(1));
  w.fake->over_limit = "its client has not read its replies";
  w.invoke(ep(1), token, 50, "echo", "unread");
  CHECK(w.fake->closes(ep(1)));  // at the sweep after its refusal had time to arrive
  w.stop();
  CHECK(w.fake->count_sent() == 0);
  CHECK(w.logged("closing the connection from 10.0.0.9:4000 (key "));
  CHECK(w.logged("its client has not read its replies"));
}

TEST_CASE("requests through a lane are answered through it, with a kick for a client that sleeps", "[server]") {
  for (const bool inline_quick : {false, true}) {
    INFO("inline_quick " << inline_quick);
    Worker w(inline_quick);
    w.start();
    const SessionToken token = w.connect(ep(1));
    Bytes ask = encode(RequestOnly{60});
    ask.insert(ask.end(), token.begin(), token.end());
    w.fake->put(ep(1), MsgType::lane, std::move(ask));
    const Msg offer_msg = w.fake->take(ep(1));
    REQUIRE(offer_msg.type == MsgType::lane_reply);
    auto offer = decode_lane_offer(offer_msg.header);
    REQUIRE(offer.ok());
    REQUIRE(offer->status == ReplyStatus::ok);
    const lane::Segment seg = lane::attach(offer->shm_id, offer->nonce);
    REQUIRE(seg);
    Bytes buf;
    for (uint64_t i = 0; i < 3; ++i) {
      // The first request's client sleeps: its reply comes with a kick through the transport.
      // (Only the first: a later one's flag would race with the flush of the reply before it.)
      const bool sleeps = i == 0;
      seg.set_client_idle(sleeps);
      const std::string input = "by lane " + std::to_string(i);
      seg.requests().write(i, MsgType::invoke, Worker::invoke_header(w.digest, token, 61 + i, "echo", input.size()),
                           ByteView(reinterpret_cast<const uint8_t*>(input.data()), input.size()));
      w.fake->wake();  // as the client's kick would, if the leader sleeps
      MsgType type{};
      ByteView h, d;
      std::string why;
      const auto until = Clock::now() + 20s;  // a ceiling: it comes within milliseconds
      while (!seg.replies().ready(i) && Clock::now() < until) std::this_thread::sleep_for(100us);
      REQUIRE(seg.replies().read(i, buf, &type, &h, &d, &why) == lane::Ring::Got::frame);
      REQUIRE(type == MsgType::result);
      auto r = decode_result(h);
      REQUIRE(r.ok());
      CHECK(r->request_id == 61 + i);
      CHECK(r->status == ReplyStatus::ok);
      CHECK(std::string(d.begin(), d.end()) == input);
      seg.replies().taken(i + 1);
      if (sleeps) CHECK(w.fake->take(ep(1)).type == MsgType::kick);
    }
    w.stop();
    CHECK(w.fake->count_sent() == 0);  // no reply through the transport but the kick
    lane::detach(seg);
  }
}
