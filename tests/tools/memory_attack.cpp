// xcargo-memory-attack: tries to reach a loader's memory outside what it exports, as a peer
// with a stock UCX client and no key would (loader/SECURITY.md, "Memory access by peers").
// usage: xcargo-memory-attack --to HOST:PORT --region NAME [--key KEY]
//   (--key: authenticate with KEY after the one-sided attempts, which come first, unauthenticated)
//   put-anywhere   ucp_put of 8 bytes to address 16 with a remote key this client packed itself
//   get-anywhere   ucp_get of 8 bytes from this tool's own code address with such a key
//   read-past-end  region_read of the region's last 8 bytes and 8 more
//   read-overflow  region_read whose offset + length wraps around 2^64
//   read-unknown   region_read of a region that does not exist
//   region-key     the region reply must carry no address and no key (one-sided reads off)
//   and a control: a read inside the region is served.
// Prints one "ATTACK: outcome" line each; exits 0 when every attack failed as it should, 1
// when one got through, 2 when the tool itself could not run.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "net/ucx.h"
#include "raw_client.h"
#include "tool_args.h"
#include "auth/auth.h"
#include "xcargo/identity.h"
#include "wire/wire.h"

using namespace xcargo;
using Clock = std::chrono::steady_clock;

namespace {

[[noreturn]] void die(const std::string& what) { test::die("xcargo-memory-attack", what, 2); }

test::RawClient* g_c = nullptr;  // the connection to the loader
ucp_worker_h g_worker = nullptr;
int g_failures = 0;

void report(const char* attack, bool defended, const std::string& outcome) {
  std::printf("%s: %s: %s\n", attack, defended ? "refused" : "GOT THROUGH", outcome.c_str());
  std::fflush(stdout);
  if (!defended) ++g_failures;
}

// Polls until the request completes or `seconds` pass; its final status. A request that
// never completes, even cancelled, is left behind (the tool exits soon).
ucs_status_t wait(ucs_status_ptr_t r, int seconds = 10) {
  if (r == nullptr) return UCS_OK;
  if (UCS_PTR_IS_ERR(r)) return UCS_PTR_STATUS(r);
  auto deadline = Clock::now() + std::chrono::seconds(seconds);
  ucs_status_t s;
  while ((s = ucp_request_check_status(r)) == UCS_INPROGRESS && !g_c->lost() && Clock::now() < deadline) ucp_worker_progress(g_worker);
  if (s != UCS_INPROGRESS) {
    ucp_request_free(r);
    return s;
  }
  ucp_request_cancel(g_worker, r);
  deadline = Clock::now() + std::chrono::seconds(1);
  while (ucp_request_check_status(r) == UCS_INPROGRESS && Clock::now() < deadline) ucp_worker_progress(g_worker);
  if (ucp_request_check_status(r) != UCS_INPROGRESS) ucp_request_free(r);
  return g_c->lost() ? UCS_ERR_CONNECTION_RESET : UCS_ERR_TIMED_OUT;
}

std::string region_read(const std::string& name, uint64_t offset, uint64_t length, wire::ReplyStatus want) {
  if (!g_c->ask(wire::MsgType::region_read, wire::encode(wire::RegionRead{1, offset, length, name}))) return "no reply";
  auto d = wire::decode_region_data(g_c->answer());
  if (!d.ok()) return "undecodable reply: " + d.error().message();
  return std::string(wire::status_name(d->status)) + (d->status == want ? "" : " (expected " + std::string(wire::status_name(want)) + ")");
}

}  // namespace

int main(int argc, char** argv) {
  const std::string to = test::arg(argc, argv, "--to"), region = test::arg(argc, argv, "--region");
  if (to.empty() || region.empty()) die("usage: xcargo-memory-attack --to HOST:PORT --region NAME");
  test::RawClient c("xcargo-memory-attack", to, /*rma=*/true);  // the attacker offers one-sided access itself
  g_c = &c;
  g_worker = c.worker().worker();
  ucp_ep_h ep = c.ep();
  c.greet();

  // A remote key packed from this client's own memory: software-emulated RMA never checks it.
  static uint64_t mine = 0x5841545441434b21;  // "XATTACK!"
  ucp_mem_map_params_t mp{};
  mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
  mp.address = &mine;
  mp.length = sizeof mine;
  ucp_mem_h memh = nullptr;
  void* packed = nullptr;
  size_t packed_size = 0;
  ucp_rkey_h rkey = nullptr;
  if (ucp_mem_map(c.worker().context(), &mp, &memh) != UCS_OK || ucp_rkey_pack(c.worker().context(), memh, &packed, &packed_size) != UCS_OK)
    die("cannot pack a remote key");
  if (ucs_status_t us = ucp_ep_rkey_unpack(ep, packed, &rkey); us != UCS_OK) {
    report("put-anywhere", true, std::string("the key does not unpack for this endpoint: ") + ucs_status_string(us));
    report("get-anywhere", true, std::string("the key does not unpack for this endpoint: ") + ucs_status_string(us));
  } else {
    // A put leaves without an answer; whether it landed shows in what follows: a write to
    // address 16 would kill the worker, and with it this connection.
    ucp_request_param_t p{};
    ucs_status_t sent = wait(ucp_put_nbx(ep, &mine, sizeof mine, 16, rkey, &p));
    ucs_status_t flushed = wait(ucp_ep_flush_nbx(ep, &p), 3);
    const bool alive = c.ask(wire::MsgType::has, wire::encode(wire::Has{9, {}})) && !c.lost();
    report("put-anywhere", alive && flushed != UCS_OK,
           std::string("sent: ") + ucs_status_string(sent) + "; acknowledged: " +
               (flushed == UCS_OK ? "yes" : ucs_status_string(flushed)) + "; the node " + (alive ? "still answers" : "is gone"));
    uint64_t got = 0;
    ucs_status_t s = wait(ucp_get_nbx(ep, &got, sizeof got, uint64_t(reinterpret_cast<uintptr_t>(&main)), rkey, &p), 3);
    report("get-anywhere", s != UCS_OK, s == UCS_OK ? "read 8 bytes of the loader's memory" : ucs_status_string(s));
    ucp_rkey_destroy(rkey);
  }
  ucp_rkey_buffer_release(packed);
  ucp_mem_unmap(c.worker().context(), memh);

  if (c.lost()) {
    std::printf("the connection dropped after the one-sided attempts: the worker died\n");
    return 1;
  }
  if (const std::string key_file = test::arg(argc, argv, "--key"); !key_file.empty()) {
    auto key = SigningKey::load(key_file);
    if (!key.ok()) die(key.error().message());
    if (const std::string v = c.prove(c.proof(*key)); v != "ok") die(to + ": the key was not accepted: " + v);
  }
  if (!c.ask(wire::MsgType::region, wire::encode(wire::RegionQuery{2, region}))) die(to + ": no region_reply");
  auto rr = wire::decode_region_reply(c.answer());
  if (!rr.ok() || rr->status != wire::ReplyStatus::ok) die(to + ": region '" + region + "' is not there");
  report("region-key", rr->address == 0 && rr->rkey.empty(),
         "address " + std::to_string(rr->address) + ", " + std::to_string(rr->rkey.size()) + "-byte key");
  using wire::ReplyStatus;
  std::string o = region_read(region, rr->length - 8, 16, ReplyStatus::out_of_range);
  report("read-past-end", o == "out_of_range", o);
  o = region_read(region, UINT64_MAX - 7, 16, ReplyStatus::out_of_range);
  report("read-overflow", o == "out_of_range", o);
  o = region_read("no-such-region", 0, 8, ReplyStatus::no_region);
  report("read-unknown", o == "no_region", o);
  o = region_read(region, rr->length - 8, 8, ReplyStatus::ok);  // the control: a fair read is served
  std::printf("read-inside (control): %s\n", o.c_str());
  if (o != "ok") ++g_failures;
  return g_failures ? 1 : 0;
}
