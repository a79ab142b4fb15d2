// The server's side of shared-memory lanes (lane.h; wire-protocol.md 8.1): offering them,
// polling their requests in batches, flushing replies and kicking sleeping clients, and
// answering what waits in them when the worker is forced to end.
#include "server/server_impl.h"

namespace xcargo::loader {

using namespace wire;
using namespace server_detail;

void UcxServer::Impl::open_lane(Ep ep, Client* c, ByteView header) {
  auto q = decode_request(header);
  if (!q.ok() || !c || c->probe || ep.is_tls())
    return send(ep, handler->bad_request(!q.ok() ? q.error().message()
                                         : ep.is_tls() ? "lane: offered on UCX connections only, not over TLS"
                                                       : "lane: not a client connection"));
  LaneOffer m;
  m.request_id = q->request_id;
  reap_lanes();
  if (!c->lane && lanes.size() >= kMaxLanes) {
    m.status = ReplyStatus::limit;
    m.message = "this node has no shared-memory lane to spare (" + std::to_string(kMaxLanes) + " in use); requests go through UCX";
  } else if (!c->lane) {
    if (auto l = Lane::create(ep, c->serial); l.ok()) {
      c->lane = std::move(*l);
      lanes.push_back(c->lane);
      lanes_opened.fetch_add(1, std::memory_order_relaxed);
    } else {
      if (lane_failures.due()) log("cannot make a shared-memory lane: " + l.error().message() + " (" + std::to_string(lane_failures.count()) + " such so far)");
      m.status = ReplyStatus::internal;
      m.message = l.error().message();
    }
  }
  if (c->lane) {
    m.shm_id = c->lane->shm_id();
    m.nonce = c->lane->nonce();
  }
  send(ep, {MsgType::lane_reply, encode(m), {}});
}

bool UcxServer::Impl::poll_lanes() {
  bool any = false, batch_runs = false;
  lane_batch = true;  // the kernels it runs inline share one monitor mark, each moving its start (mark_inline)
  for (const std::shared_ptr<Lane>& lp : lanes) {
    Lane& l = *lp;
    int n = 0;
    for (; n < timing::kReadyBatch && !l.waits_in_queue(); ++n) {
      MsgType type{};
      ByteView h, d;
      std::string why;
      const auto got = l.next(&type, &h, &d, &why);
      if (got == lane::Ring::Got::nothing) break;
      any = true;
      Client* c = eps.find(l.ep());
      if (!c || c->serial != l.serial()) break;  // its connection is gone: reap_lanes drops the lane
      if (got == lane::Ring::Got::malformed) {
        log("stopped reading the shared-memory lane of " + c->peer + (c->session.who.empty() ? "" : " (" + c->session.who + ")") +
            ": " + why + "; its requests must come through UCX");
        break;
      }
      // Requests only (a client's, and a peer node's forwards): not the handshake, lanes
      // themselves, replies or unknown types. No client writes them, so the lane is read no
      // more (they were dropped and logged every 1000th: a flood of them wrote 1 MB of log a second).
      if (!by_lane(type)) {
        l.stop();
        log("stopped reading the shared-memory lane of " + c->peer + (c->session.who.empty() ? "" : " (" + c->session.who + ")") +
            ": it carried a message of type " + std::to_string(int(type)) +
            ", which only UCX may carry (only requests travel by lane); its requests must come through UCX");
        break;
      }
      bump(lane_requests);
      if (!batch_runs) handler->begin_batch(), batch_runs = true;
      intake(type, l.ep(), h.data(), h.size(), const_cast<uint8_t*>(d.data()), d.size(), false, &lp);
    }
    // Its replies are flushed (Lane::flush) once a poll finds no request from its client,
    // or after a batch's worth: a client still sending requests is awake. With other lanes,
    // at the end of its batch: the next lane's kernels (inline, if one misjudged as quick
    // runs long) must not hold the kick of a client that sleeps.
    l.publish();
    if (l.unflushed() && (n == 0 || lanes.size() > 1 || l.unflushed() >= uint32_t(timing::kReadyBatch))) flush_lane(lp);
  }
  lane_batch = false;
  if (batch_marked) unmark_inline(*t_guarded_slot), batch_marked = false;
  if (batch_runs) handler->end_batch();
  return any;
}

bool UcxServer::Impl::lanes_idle(bool idle) {
  for (auto& l : lanes) l->set_idle(idle);
  if (!idle || lanes.empty()) return true;
  lane::fence();
  for (auto& l : lanes)
    if (l->pending()) return lanes_idle(false), false;
  return true;
}

void UcxServer::Impl::flush_lane(const std::shared_ptr<Lane>& l) {
  Client* c = eps.find(l->ep());
  if (l->flush() && c && c->lane == l) send_counted(l->ep(), *c, Reply{MsgType::kick, {}, {}});
}

void UcxServer::Impl::flush_lanes() {
  for (const std::shared_ptr<Lane>& l : lanes)
    if (l->unflushed()) flush_lane(l);
}

void UcxServer::Impl::end_lanes_at_forced_end() {
  std::lock_guard<std::mutex> l(lead_mu);
  Bytes buf;
  uint64_t answered = 0;
  for (const std::shared_ptr<Lane>& lane : lanes) {
    lane->publish();
    for (uint32_t k = 0; k < lane::kSlots; ++k) {
      MsgType type{};
      ByteView h, d;
      std::string why;
      if (lane->next_into(buf, &type, &h, &d, &why) != lane::Ring::Got::frame) break;
      if (!by_lane(type) || type == MsgType::forward) continue;  // a forward's result goes to its client, through UCX
      if (!lane->reply(MsgType::result, restarting_header(type, h), {})) break;  // its ring is full: the client sees the connection lost
      ++answered;
    }
    lane->publish();
    lane->mark_ended();  // what its client writes from now on is not read: it sends that again elsewhere
  }
  if (answered) log("answered " + std::to_string(answered) + " requests waiting in shared-memory lanes 'restarting': they did not run");
}

}  // namespace xcargo::loader
