// xcargo-lane-attack: writes into a shared-memory lane what no client would
// (loader/SECURITY.md, "Memory access by peers"; wire-protocol.md section 8).
// usage: xcargo-lane-attack --to HOST:PORT --key AUTHORIZED_KEY [--unread-to HOST:PORT]
//   before-auth    a lane asked for before authenticating: refused, no segment
//   unsealed       a list request in the lane without the session token: dropped unanswered
//   handshake      hello, auth, lane, kick, result and unknown frames, each in a lane of its
//                  own: the worker stops reading that lane; the connection is answered
//                  through UCX
//   forward        a forward from this client's key, which lacks the forward verb (only peer
//                  nodes forward through lanes): answered unauthenticated, and nothing runs
//   lying-taken    the client's replies_taken set far ahead: replies past the ring come through UCX
//   overlong       a slot whose lengths pass its end (and a wrapping pair): the worker stops
//                  reading that lane and still answers the connection through UCX
//   flood          100,000 sealed invocations of a cargo the node does not have, as fast as the
//                  lane takes them (each is logged as failed): the node still answers; the log
//                  keeps a bounded number of such lines (boundary_test.sh counts them)
//   unread         sealed list requests written as fast as the lane takes them while the client
//                  never reads a reply nor lets UCX deliver one: the worker closes the
//                  connection (its unread replies' limit) instead of holding them all
//   and a control: a sealed list request in the lane is answered in the reply ring.
// Prints one "ATTACK: outcome" line each; exits 0 when every attack failed as it should, 1
// when one got through, 2 when the tool itself could not run.
#include <sys/shm.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <thread>

#include "raw_client.h"
#include "tool_args.h"
#include "xcargo/identity.h"
#include "wire/lane.h"
#include "wire/wire.h"

using namespace xcargo;
using namespace xcargo::wire;
using Clock = std::chrono::steady_clock;

namespace {

[[noreturn]] void die(const std::string& what) { test::die("xcargo-lane-attack", what, 2); }

int g_failures = 0;
void report(const char* attack, bool defended, const std::string& outcome) {
  std::printf("%s: %s: %s\n", attack, defended ? "refused" : "GOT THROUGH", outcome.c_str());
  std::fflush(stdout);
  if (!defended) ++g_failures;
}

// An authenticated raw connection with its lane attached.
struct Laned {
  test::RawClient c;
  lane::Segment seg;
  uint64_t sent = 0, read = 0, taken = 0;
  Bytes buf;
  Bytes last;  // the header of the reply reply_within found
  Laned(const std::string& to, const SigningKey& key) : c("xcargo-lane-attack", to) {
    c.greet();
    if (std::string s = c.prove(c.proof(key)); s != "ok") die("the authorized key was refused: " + s);
    if (!c.ask(MsgType::lane, encode(RequestOnly{1}))) die("no lane_reply");
    auto offer = decode_lane_offer(c.answer());
    if (!offer.ok() || offer->status != ReplyStatus::ok) die("no lane: " + (offer.ok() ? offer->message : offer.error().message()));
    void* p = ::shmat(offer->shm_id, nullptr, 0);
    if (p == reinterpret_cast<void*>(-1)) die("cannot attach the lane: " + std::string(std::strerror(errno)));
    seg = lane::Segment(static_cast<uint8_t*>(p));
    if (!seg.matches(offer->nonce)) die("the lane's control page does not match its offer");
  }
  ~Laned() { ::shmdt(seg.base()); }
  // Writes a frame; kicks the worker as a client would (sealed kick, through UCX).
  void put(MsgType type, const Bytes& header) {
    const auto deadline = Clock::now() + std::chrono::seconds(5);
    while (!seg.requests().has_room(sent, &taken) && Clock::now() < deadline) ucp_worker_progress(c.worker().worker());
    seg.requests().write(sent++, type, header, {});
    lane::fence();
    if (seg.worker_idle()) c.send(uint16_t(MsgType::kick), c.sealed({}), true);
  }
  // Writes a frame when the worker has taken enough to make room, without any UCX progress
  // (nothing read, no kick); false if no room came within `ms`.
  // A worker that sleeps is kicked as a client would, but blind (no UCX progress): without
  // kicks a worker with --spin-us 0 took them only when it woke by itself, about a thousand a
  // second, and the unread case ran out of time before its replies reached their limit.
  bool put_blind(MsgType type, const Bytes& header, int ms) {
    if (!seg.requests().has_room(sent, &taken)) {
      const auto deadline = Clock::now() + std::chrono::milliseconds(ms);
      while (!seg.requests().has_room(sent, &taken))
        if (Clock::now() >= deadline) return false;
    }
    seg.requests().write(sent++, type, header, {});
    lane::fence();
    if (seg.worker_idle()) c.send_blind(uint16_t(MsgType::kick), c.sealed({}));
    return true;
  }
  // Takes every reply waiting in the reply ring; how many.
  int drain() {
    MsgType type{};
    ByteView h, d;
    std::string why;
    int n = 0;
    while (seg.replies().read(read, buf, &type, &h, &d, &why) == lane::Ring::Got::frame) seg.replies().taken(++read), ++n;
    return n;
  }
  // Whether a reply (of type `want`, if given) appears in the reply ring within `ms`.
  bool reply_within(int ms, std::optional<MsgType> want = std::nullopt) {
    const auto deadline = Clock::now() + std::chrono::milliseconds(ms);
    MsgType type{};
    ByteView h, d;
    std::string why;
    while (Clock::now() < deadline) {
      if (seg.replies().read(read, buf, &type, &h, &d, &why) == lane::Ring::Got::frame) {
        seg.replies().taken(++read);
        if (!want || type == *want) return last.assign(h.begin(), h.end()), true;
        continue;
      }
      ucp_worker_progress(c.worker().worker());
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    return false;
  }
};

SigningKey load(const std::string& path) {
  auto k = SigningKey::load(path);
  if (!k.ok()) die(path + ": " + k.error().message());
  return std::move(*k);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string to = test::arg(argc, argv, "--to");
  if (to.empty()) die("usage: xcargo-lane-attack --to HOST:PORT --key KEY");
  const SigningKey key = load(test::arg(argc, argv, "--key"));
  {
    test::RawClient c("xcargo-lane-attack", to);
    c.greet();
    const bool answered = c.ask(MsgType::lane, encode(RequestOnly{1}), {}, 5);
    auto offer = decode_lane_offer(c.answer());
    auto refusal = decode_result(c.answer());
    const bool lane = answered && offer.ok() && offer->status == ReplyStatus::ok;
    report("before-auth", !lane,
           !answered ? "no answer" : lane ? "a lane (segment " + std::to_string(offer->shm_id) + ")" :
           refusal.ok() ? std::string(status_name(refusal->status)) : "refused");
  }
  {
    Laned l(to, key);
    l.put(MsgType::list, l.c.sealed(encode(RequestOnly{7})));
    const bool control = l.reply_within(5000);
    report("control", true, control ? "a sealed list in the lane was answered in the reply ring" : "NOT ANSWERED");
    if (!control) ++g_failures;
    l.put(MsgType::list, encode(RequestOnly{8}));  // no token
    report("unsealed", !l.reply_within(1000), "a list without the session token");
    // The worker must not wait for a client that claims it took replies it never had: once
    // its reply ring looks full, it reads the claim, and sends the rest through UCX.
    __atomic_store_n(reinterpret_cast<uint64_t*>(l.seg.base() + lane::kOffRepliesTaken), uint64_t(1) << 62, __ATOMIC_RELEASE);
    for (uint64_t i = 0; i < lane::kSlots + 2; ++i) l.put(MsgType::list, l.c.sealed(encode(RequestOnly{100 + i})));
    const bool by_ucx = l.c.wait_answer(5);
    report("lying-taken", by_ucx, by_ucx ? "the replies past the ring came through UCX" : "no reply at all");
  }
  // Each a lane of its own: the worker stops reading a lane that carries one.
  for (MsgType t : {MsgType::hello, MsgType::auth, MsgType::lane, MsgType::kick, MsgType::result, MsgType(999)}) {
    Laned l(to, key);
    l.put(t, l.c.sealed(encode(RequestOnly{9})));
    l.put(MsgType::list, l.c.sealed(encode(RequestOnly{10})));  // behind it: not read
    const bool unanswered = !l.reply_within(500);
    const bool alive = l.c.ask(MsgType::list, l.c.sealed(encode(RequestOnly{11})), {}, 10) && !l.c.lost();
    report("handshake", unanswered && alive,
           "a frame of type " + std::to_string(int(t)) + (unanswered ? " stopped the lane" : " did NOT stop the lane") + "; " +
               (alive ? "the connection is answered through UCX" : "the connection went away"));
  }
  {
    Laned l(to, key);
    Forward f;
    f.request_id = 13;
    f.digest.fill(0x5a);
    f.entry = "lane_forward";
    l.put(MsgType::forward, l.c.sealed(encode(f)));
    const bool answered = l.reply_within(5000, MsgType::result);
    auto r = decode_result(l.last);
    const bool denied = answered && r.ok() && r->status == ReplyStatus::unauthenticated;
    report("forward", denied,
           !answered ? "no answer" : denied ? "a forward in the lane was answered unauthenticated: " + r->message
                                            : std::string("answered ") + (r.ok() ? status_name(r->status) : "undecodably"));
  }
  {
    Laned l(to, key);
    for (auto [hl, dl] : {std::pair<uint32_t, uint32_t>{0xfffffff0u, 0x20u}, {uint32_t(lane::kCapacity), 1}}) {
      uint8_t* slot = l.seg.base() + lane::kOffRequests + (l.sent % lane::kSlots) * lane::kSlotSize;
      std::memcpy(slot + 12, &hl, 4);
      std::memcpy(slot + 16, &dl, 4);
      const uint64_t seq = ++l.sent;
      __atomic_store_n(reinterpret_cast<uint64_t*>(slot), seq, __ATOMIC_RELEASE);
      l.c.send(uint16_t(MsgType::kick), l.c.sealed({}), true);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const bool alive = l.c.ask(MsgType::list, encode(RequestOnly{11}), {}, 5) && !l.c.lost();
    test::RawClient other("xcargo-lane-attack", to);
    other.greet();
    report("overlong", alive && !other.lost(), alive ? "the connection is still answered through UCX" : "the node went away");
  }
  {
    Laned l(to, key);
    Invoke inv;
    inv.digest.fill(0x5a);
    inv.entry = "lane_flood";
    const auto t0 = Clock::now();
    int sent = 0;
    for (; sent < 100000 && Clock::now() - t0 < std::chrono::seconds(60); ++sent) {
      inv.request_id = 1000 + sent;
      // Replies are taken as they come, from the ring and from UCX: what is measured is the
      // log, not the unread replies' limit (a busy machine's slow client met that limit).
      l.put(MsgType::invoke, l.c.sealed(encode(inv)));
      l.drain();
      ucp_worker_progress(l.c.worker().worker());
    }
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    // The lane still serves: a list request through it is answered, behind the flood's last
    // replies, in the ring or (if the ring was full of replies not yet taken, as on a busy
    // machine) through UCX: a client looks in both (wire-protocol.md 8.2). It is the last
    // request, so its reply is the last UCX answer if it came that way.
    l.put(MsgType::list, l.c.sealed(encode(RequestOnly{12})));
    const Bytes list_reply = encode(RequestOnly{12});
    bool alive = false;
    for (const auto until = Clock::now() + std::chrono::seconds(10); !alive && !l.c.lost() && Clock::now() < until;)
      alive = l.reply_within(50, MsgType::list_reply) || l.c.answer() == list_reply;
    alive = alive && !l.c.lost();
    report("flood", alive, std::to_string(sent) + " failing invocations in " + std::to_string(s).substr(0, 4) + " s; " +
                               (alive ? "the node still answers" : "the node went away"));
  }
  {
    // --unread-to: a node with small limits (the default's unread limit takes 131072 replies).
    const std::string unread_to = test::arg(argc, argv, "--unread-to", to.c_str());
    Laned l(unread_to, key);
    const auto t0 = Clock::now();
    int sent = 0;
    while (sent < 1000000 && Clock::now() - t0 < std::chrono::seconds(60) &&
           l.put_blind(MsgType::list, l.c.sealed(encode(RequestOnly{uint64_t(2000 + sent)})), 3000))
      ++sent;
    // The worker stopped taking requests: it closed the connection, which UCX now reports.
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    while (!l.c.lost() && Clock::now() < deadline) ucp_worker_progress(l.c.worker().worker());
    test::RawClient other("xcargo-lane-attack", unread_to);
    other.greet();
    report("unread", l.c.lost() && !other.lost(),
           std::to_string(sent) + " requests taken, no reply read; " +
               (l.c.lost() ? "the worker closed the connection" : "the connection is still open") + "; a new client " +
               (other.lost() ? "was not answered" : "is answered"));
  }
  return g_failures ? 1 : 0;
}
