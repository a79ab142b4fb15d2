// The same-host door's worker side: tickets from the supervisor's keeper, claimed by the
// `door` message on a new endpoint; lifelines ended either way; peers' doors dialed through
// the keeper (wire-protocol.md 2.4).
#include "server/server_impl.h"

#include <sys/socket.h>

#include <cerrno>

namespace xcargo::loader {

void UcxServer::Impl::door_tell(const door_channel::Message& m) const {
  if (door_fd < 0) return;
  const Bytes b = door_channel::encode(m);
  (void)!::send(door_fd, b.data(), b.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
}

void UcxServer::Impl::door_read() {
  if (door_fd < 0) return;
  static thread_local uint8_t buf[door_channel::kMaxMessage];
  for (;;) {
    const ssize_t n = ::recv(door_fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;  // nothing more now
    if (n <= 0) {  // the keeper never sends an empty message: the channel ended (a kernel shut it down)
      door_lost();
      return;
    }
    auto m = door_channel::decode(ByteView(buf, size_t(n)));
    if (!m) continue;
    using K = door_channel::Kind;
    if (m->kind == K::client) {
      door_tickets[m->ticket] = DoorTicket{m->id, m->pid, m->uid, Clock::now()};
    } else if (m->kind == K::dialed) {
      door_dialed(*m);
    } else if (m->kind == K::dial_failed) {
      if (door_dials.erase(m->id)) peers->dial_failed(m->id, std::string(m->bytes.begin(), m->bytes.end()));
    } else if (m->kind == K::lost) {  // the peer's worker ended: so did this connection to it
      const auto it = door_dials.find(m->id);
      if (it == door_dials.end()) continue;
      const Ep ep = it->second.ep;
      door_dials.erase(it);
      if (ep && peers->lost(ep)) close_ep(ep.ucx());
    } else if (m->kind == K::gone) {  // its client closed the lifeline: gone, or never came
      std::erase_if(door_tickets, [&](const auto& t) { return t.second.id == m->id; });
      for (auto it = door_ids.begin(); it != door_ids.end(); ++it)
        if (it->second == m->id) {
          const Ep ep = it->first;
          door_ids.erase(it);
          eps.erase(ep);
          close_ep(ep.ucx());
          break;
        }
    }
  }
}

void UcxServer::Impl::door_lost() {
  ::shutdown(door_fd, SHUT_RDWR);  // the supervisor sees it too, and ends this worker if it does not end
  w->unwatch(door_fd);
  door_fd = -1;
  if (opt.on_door_lost) opt.on_door_lost();
}

void UcxServer::Impl::door_claim(ucp_ep_h ep, ByteView header) {
  auto stray = [&](const char* why) {
    if (door_strays.due())
      log(std::string("dropped a door message: ") + why + " (" + std::to_string(door_strays.count()) + " such so far)");
  };
  if (header.size() != sizeof(door::Ticket)) return stray("not a ticket");
  door::Ticket t;
  std::copy(header.begin(), header.end(), t.begin());
  const Client* known = eps.find(ep);
  // This worker's own probe (no listener to come through): one connection for the worker's
  // life, claimed again only if UCX gave its endpoint this side's earlier one.
  if (!opt.ucx_listener && t == probe_ticket) {
    if (!known) last_accepted = &eps.add(ep, "this worker's probe", Clock::now());
    return;
  }
  if (known) return stray("its connection is already one");
  if (door_fd < 0) return stray("this worker has no door");
  auto it = door_tickets.find(t);
  if (it == door_tickets.end()) {  // the keeper's word may not have been read yet
    door_read();
    it = door_tickets.find(t);
  }
  if (it == door_tickets.end()) return stray("no ticket of this worker's");
  const DoorTicket d = it->second;
  door_tickets.erase(it);
  const std::string host = "this host (uid " + std::to_string(d.uid) + ")";
  Client& c = eps.add(ep, "pid " + std::to_string(d.pid) + " on " + host, Clock::now());
  door_ids[ep] = d.id;
  wary_until = Clock::now() + timing::kWaryAfterConnect;
  last_accepted = &c;
}

void UcxServer::Impl::door_forget(Ep ep) {
  const auto it = door_ids.find(ep);
  if (it == door_ids.end()) return;
  door_tell(door_channel::Message{door_channel::Kind::close, it->second, {}, 0, 0, {}});
  door_ids.erase(it);
}

void UcxServer::Impl::door_sweep(Clock::time_point now) {
  door_read();
  for (auto it = door_tickets.begin(); it != door_tickets.end();)
    if (now - it->second.at > opt.auth_deadline) {
      door_tell(door_channel::Message{door_channel::Kind::close, it->second.id, {}, 0, 0, {}});
      it = door_tickets.erase(it);
    } else {
      ++it;
    }
}

ucs_status_t UcxServer::Impl::on_door(void* arg, const void* header, size_t header_length, void*, size_t,
                                      const ucp_am_recv_param_t* param) {
  auto* self = static_cast<HandlerArg*>(arg)->self;
  const bool has_ep = (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) && param->reply_ep;
  if (!has_ep || (self->door_fd < 0 && self->opt.ucx_listener)) return on_stray(arg, header, header_length, nullptr, 0, param);
  self->door_claim(param->reply_ep, ByteView(static_cast<const uint8_t*>(header), header_length));
  return UCS_OK;
}

uint64_t UcxServer::Impl::door_dial(const std::string& host_port) {
  if (door_fd < 0) return 0;
  const uint64_t id = next_dial++;
  door_dials[id] = DoorDial{host_port, {}, {}};
  door_tell(door_channel::Message{door_channel::Kind::dial, id, {}, 0, 0, Bytes(host_port.begin(), host_port.end())});
  return id;
}

void UcxServer::Impl::door_dialed(const door_channel::Message& m) {
  const auto it = door_dials.find(m.id);
  if (it == door_dials.end() || it->second.ep) return;  // not this worker's dial, or answered twice
  DoorDial& d = it->second;
  auto ep = net::connect_address(w->worker(), m.bytes, &Impl::on_ep_error, this);
  if (!ep.ok()) {
    const std::string why = d.address + ": " + ep.error().message();
    door_tell(door_channel::Message{door_channel::Kind::close, m.id, {}, 0, 0, {}});
    door_dials.erase(it);
    return peers->dial_failed(m.id, why);
  }
  d.ep = *ep;
  d.ticket = m.ticket;  // kept while d lives
  if (Status s = net::send_claim(*ep, d.ticket); !s.ok()) {  // the hello would go unclaimed
    const std::string why = d.address + ": " + s.error().message();
    door_undial(d.ep);
    close_ep(*ep);
    return peers->dial_failed(m.id, why);
  }
  if (!peers->dialed(m.id, d.ep)) {  // nobody waits for it any more
    door_undial(d.ep);
    close_ep(*ep);
  }
}

void UcxServer::Impl::door_undial(Ep ep) {
  if (!ep) return;
  for (auto it = door_dials.begin(); it != door_dials.end(); ++it)
    if (it->second.ep == ep) {
      door_tell(door_channel::Message{door_channel::Kind::close, it->first, {}, 0, 0, {}});
      door_dials.erase(it);
      return;
    }
}

}  // namespace xcargo::loader
