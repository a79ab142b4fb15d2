// xcargo-forge-forward: sends a node a `forward` message as if from another loader, with a
// cargo that may be tampered with, and prints the result that comes back to its own address.
// Lets the tests check that a forwarded cargo is verified like a pushed one.
// usage: xcargo-forge-forward --to HOST:PORT --cargo FILE --entry NAME [--flip OFFSET] [--hop N]
//        [--digest-of FILE]   (name another cargo's digest in the header)
//        [--key KEY]          (authenticate first with this key, as a peer node does)
// Prints "auth: STATUS" when it authenticated, then "STATUS: MESSAGE" of the result; exits 0
// when a result came, 1 if none within 10 s (a loader drops a forward it does not accept).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "net/ucx.h"
#include "tool_args.h"
#include "xcargo/auth.h"
#include "xcargo/cargo.h"
#include "xcargo/identity.h"
#include "xcargo/file.h"
#include "xcargo/wire.h"

using namespace xcargo;
using Clock = std::chrono::steady_clock;

namespace {

using test::arg;

[[noreturn]] void die(const std::string& what) { test::die("xcargo-forge-forward", what, 2); }

Bytes result_header, reply_header;
bool got = false, got_reply = false;

Digest digest_of(const std::string& path) {
  auto b = read_file(path, 1u << 30);
  if (!b.ok()) die(b.error().message());
  auto c = parse_container(*b);
  if (!c.ok()) die(c.error().message());
  return c->digest;
}

}  // namespace

int main(int argc, char** argv) {
  auto cargo = read_file(arg(argc, argv, "--cargo"), 1u << 30);
  if (!cargo.ok()) die(cargo.error().message());
  wire::Forward f;
  f.request_id = 77;
  f.digest = digest_of(arg(argc, argv, "--digest-of", arg(argc, argv, "--cargo").c_str()));
  f.hop = uint32_t(std::atoi(arg(argc, argv, "--hop", "1").c_str()));
  f.from_node = 9;
  f.entry = arg(argc, argv, "--entry");
  if (const std::string flip = arg(argc, argv, "--flip"); !flip.empty()) (*cargo)[std::stoul(flip) % cargo->size()] ^= 0x01;
  f.cargo_size = cargo->size();

  auto w = net::UcxWorker::create();
  if (!w.ok()) die(w.error().message());
  auto address = (*w)->address();
  if (!address.ok()) die(address.error().message());
  f.reply_address = *address;
  ucp_am_handler_param_t hp{};
  hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB;
  hp.id = uint16_t(wire::MsgType::result);
  hp.cb = [](void*, const void* header, size_t len, void*, size_t, const ucp_am_recv_param_t*) -> ucs_status_t {
    const auto* h = static_cast<const uint8_t*>(header);
    result_header.assign(h, h + len);
    got = true;
    return UCS_OK;
  };
  ucp_worker_set_am_recv_handler((*w)->worker(), &hp);
  for (wire::MsgType t : {wire::MsgType::hello_reply, wire::MsgType::auth_reply}) {
    hp.id = uint16_t(t);
    hp.cb = [](void*, const void* header, size_t len, void*, size_t, const ucp_am_recv_param_t*) -> ucs_status_t {
      const auto* h = static_cast<const uint8_t*>(header);
      reply_header.assign(h, h + len);
      got_reply = true;
      return UCS_OK;
    };
    ucp_worker_set_am_recv_handler((*w)->worker(), &hp);
  }
  auto ep = net::connect_ep((*w)->worker(), arg(argc, argv, "--to"));
  if (!ep.ok()) die(ep.error().message());
  ucp_ep_h e = *ep;
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  p.flags = UCP_AM_SEND_FLAG_REPLY;  // so that the loader knows which connection (and key) this is
  // exchange: sends a header-only message and waits up to 10 s for the answer's header.
  auto exchange = [&](wire::MsgType type, const Bytes& header) {
    got_reply = false;
    ucs_status_ptr_t r = ucp_am_send_nbx(e, uint16_t(type), header.data(), header.size(), nullptr, 0, &p);
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    while (!got_reply && Clock::now() < deadline) ucp_worker_progress((*w)->worker());
    if (UCS_PTR_IS_PTR(r)) {
      while (ucp_request_check_status(r) == UCS_INPROGRESS) ucp_worker_progress((*w)->worker());
      ucp_request_free(r);
    }
    if (!got_reply) die("no answer to message type " + std::to_string(int(type)));
  };
  if (const std::string key_file = arg(argc, argv, "--key"); !key_file.empty()) {
    auto key = SigningKey::load(key_file);
    if (!key.ok()) die(key.error().message());
    auto nonce = auth::random_nonce();
    if (!nonce.ok()) die(nonce.error().message());
    exchange(wire::MsgType::hello, wire::encode(wire::Hello{wire::kVersion, wire::kVersion, {}, *nonce}));
    auto hr = wire::decode_hello_reply(reply_header);
    if (!hr.ok()) die(hr.error().message());
    auto sig = key->sign(auth::client_proof(*nonce, hr->nonce, hr->node_key, key->public_key().raw));
    if (!sig.ok()) die(sig.error().message());
    exchange(wire::MsgType::auth, wire::encode(wire::Auth{1, key->public_key().raw, *sig}));
    auto ar = wire::decode_auth_reply(reply_header);
    if (!ar.ok()) die(ar.error().message());
    std::printf("auth: %s (%s)\n", wire::status_name(ar->status), auth::verbs_text(ar->verbs).c_str());
  }
  const Bytes header = wire::encode(f);
  ucs_status_ptr_t r = ucp_am_send_nbx(e, uint16_t(wire::MsgType::forward), header.data(), header.size(), cargo->data(),
                                       cargo->size(), &p);
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (!got && Clock::now() < deadline) ucp_worker_progress((*w)->worker());
  if (UCS_PTR_IS_PTR(r)) {
    while (ucp_request_check_status(r) == UCS_INPROGRESS && Clock::now() < deadline) ucp_worker_progress((*w)->worker());
    ucp_request_free(r);
  }
  if (!got) {
    std::printf("no result\n");
    return 1;
  }
  auto res = wire::decode_result(result_header);
  if (!res.ok()) die(res.error().message());
  std::printf("%s: %s\n", wire::status_name(res->status), res->message.c_str());
  return 0;
}
