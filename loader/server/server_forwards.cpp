// Peer nodes and computations that hop between them: forwards sent on (with the cargo the
// first time), their failures told to their clients, and chain results relayed to the node
// the client is connected to (wire-protocol.md 4.9, 4.13).
#include "server/server_impl.h"

#include "auth/auth.h"

namespace xcargo::loader {

using namespace wire;
using namespace server_detail;

const Bytes& UcxServer::Impl::client_address(Ep ep) {
  static const Bytes none;
  Client* c = eps.find(ep);
  if (!c) return none;
  if (!c->relay) {
    if (relays.size() > 2 * eps.all().size() + 64)  // forget those whose connection is gone
      std::erase_if(relays, [this](const auto& r) { const Client* k = eps.find(r.second); return !k || k->relay != r.first; });
    auto n = auth::random_nonce();
    uint64_t id = 0;
    if (n.ok()) std::memcpy(&id, n->data(), sizeof id);
    if (id == 0 || relays.count(id)) return none;  // no randomness: its chains' results say unreachable
    c->relay = id;
    relays[id] = ep;
    c->address = encode(RelayAddress{opt.node_id, id});
  }
  return c->address;
}

void UcxServer::Impl::relay_result(const RelayAddress& to, Reply&& r) {
  if (to.node_id == opt.node_id) return deliver_relayed(to.relay_id, std::move(r));
  std::string why;
  Peer* p = peers->get(to.node_id, &why);
  if (!p) {
    if (relays_lost.due())
      log("dropped a forwarded result for a client of node " + std::to_string(to.node_id) + ": " + why + " (" +
          std::to_string(relays_lost.count()) + " such so far)");
    return;
  }
  Bytes header = encode(Relay{to.relay_id, std::move(r.header)});
  peers->send(*p, {MsgType::relay, std::move(header), std::move(r.data)}, [this, node = to.node_id](const std::string& why) {
    if (relays_lost.due())
      log("dropped a forwarded result for a client of node " + std::to_string(node) + ": " + why + " (" +
          std::to_string(relays_lost.count()) + " such so far)");
  });
}

void UcxServer::Impl::deliver_relayed(uint64_t id, Reply&& r) {
  auto it = relays.find(id);
  const Client* c = it == relays.end() ? nullptr : eps.find(it->second);
  if (!c || c->relay != id) {
    if (relays_lost.due())
      log("dropped a forwarded result: its client's connection is gone (" + std::to_string(relays_lost.count()) + " such so far)");
    return;
  }
  send(it->second, std::move(r));
}

void UcxServer::Impl::relay_in(ByteView header, void* data, size_t length, Bytes* owned) {
  auto m = relayed(header, length);
  if (!m) return;
  Bytes d = owned && owned->data() == data ? std::move(*owned) : Bytes(static_cast<const uint8_t*>(data), static_cast<const uint8_t*>(data) + length);
  deliver_relayed(m->relay_id, {MsgType::result, std::move(m->result), std::move(d)});
}

std::optional<Relay> UcxServer::Impl::relayed(ByteView header, uint64_t length) {
  std::string why;
  auto m = decode_relay(header);
  if (!m.ok()) why = m.error().message();
  else if (auto r = decode_result(m->result); !r.ok()) why = r.error().message();
  else if (length > handler->max_reply()) why = std::to_string(length) + " data bytes, over the largest reply (" + std::to_string(handler->max_reply()) + ")";
  if (why.empty()) return std::move(*m);
  const uint64_t n = ++bad_relays;
  if ((n & (n - 1)) == 0) log("dropped a relay: " + why + " (" + std::to_string(n) + " such so far)");
  return std::nullopt;
}

void UcxServer::Impl::send_to_address(const Bytes& address, Reply&& r) {
  if (auto relay = relay_address_of(address)) return relay_result(*relay, std::move(r));
  if (relays_lost.due())
    log("dropped a forwarded result: its chain names no relay address for its client (" + std::to_string(relays_lost.count()) +
        " such so far)");
}

bool UcxServer::Impl::peer_reply(MsgType type, ByteView hv) {
  if (type == MsgType::hello_reply) {
    auto r = decode_hello_reply(hv);
    return r.ok() && peers->on_hello_reply(*r);  // else not from a peer this node greeted
  }
  if (type == MsgType::lane_reply) {
    auto r = decode_lane_offer(hv);
    return r.ok() && peers->on_lane_offer(*r);
  }
  if (type != MsgType::auth_reply) return false;
  auto r = decode_auth_reply(hv);
  return r.ok() && peers->on_auth_reply(*r);
}

void UcxServer::Impl::deliver(Ep ep, Step&& step) {
  if (step.forward) {
    Forward& f = *step.forward;
    const uint32_t node = step.forward_node;
    std::string why;
    Peer* p = peers->get(node, &why);
    if (!p) return undelivered(f, node, why);
    if (step.came_from != Step::kNoNode) peers->holds(step.came_from, f.digest);
    const bool held = p->holds.count(f.digest) > 0;  // no cargo needed, and the lane may carry it
    Bytes data;
    if (!held && !p->sent.count(f.digest))
      if (auto cargo = handler->cargo_bytes(f.digest)) {
        f.cargo_size = cargo->size();
        data.reserve(cargo->size() + step.forward_input.size());
        data.assign(cargo->begin(), cargo->end());
        p->sent.insert(f.digest);
      }
    if (f.cargo_size == 0) data = std::move(step.forward_input);  // the input alone: not copied
    else data.insert(data.end(), step.forward_input.begin(), step.forward_input.end());
    // Into a buffer an earlier message gave back (Peers::send), with room for the token.
    Bytes header = take_spare();
    header.reserve(128 + f.entry.size() + f.reply_address.size() + kTokenSize);
    forwards.encode(f, header);
    const uint64_t n = remember_forward(f, node, p->ep);
    peers->send(*p, {MsgType::forward, std::move(header), std::move(data)}, [this, n](const std::string& why) { forward_failed(n, why); },
                held);
    give_spare(std::move(f.reply_address));  // the next hop's (Handler::run takes a spare for it)
    return;
  }
  if (!step.send_reply) return;
  if (step.reply_to.empty()) return send(ep, std::move(step.reply));
  send_to_address(step.reply_to, std::move(step.reply));
}

uint64_t UcxServer::Impl::remember_forward(const Forward& f, uint32_t node, Ep ep) {
  const uint64_t n = ++fates_made;
  const size_t i = n % kForwardFates;
  if (i >= fates.size()) fates.resize(i + 1);
  ForwardFate& r = fates[i];
  r.serial = n;
  r.node = node;
  r.ep = ep;
  r.f = f;  // a copy into the record's own buffers, reused once they are large enough
  return n;
}

void UcxServer::Impl::forward_failed(uint64_t n, const std::string& why) {
  const size_t i = n % kForwardFates;
  if (i >= fates.size() || fates[i].serial != n) {  // over kForwardFates forwards in flight since: its client waits out its own time-out
    log("failed forward: " + why + " (over " + std::to_string(kForwardFates) +
        " forwards were sent after it before it failed: its client could not be told)");
    return;
  }
  const ForwardFate& r = fates[i];
  if (peers->forget(r.node, r.ep)) transport(r.ep).drop_failed(r.ep);
  undelivered(r.f, r.node, why);
}

void UcxServer::Impl::undelivered(const Forward& f, uint32_t node, const std::string& why) {
  ResultMsg m;
  m.request_id = f.request_id;
  m.status = ReplyStatus::unreachable;
  m.node_id = opt.node_id;
  m.hops = f.hop - 1;
  m.message = "the computation could not be forwarded to node " + std::to_string(node) + ": " + why;
  log("failed forward: " + short_hex(f.digest) + "/" + f.entry + ": " + m.message);
  send_to_address(f.reply_address, {MsgType::result, encode(m), {}});
}

}  // namespace xcargo::loader
