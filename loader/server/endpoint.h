// Ep: which connection a message came on, or a reply goes to, whichever transport carries it
// (a UCX endpoint, or a connection of the TLS front door). A value compared and ordered by
// its pointer; only the transport that made it dereferences it.
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>
#include <functional>

struct ucp_ep;  // UCX's endpoint (ucp_ep_h)

namespace xcargo::loader {

struct TlsConn;  // front_door.h

class Ep {
public:
  Ep() = default;
  Ep(std::nullptr_t) {}
  // Implicit: a UCX endpoint is the usual connection, and UCX's callbacks hand one over.
  Ep(ucp_ep* e) : p_(e) {}
  static Ep tls(TlsConn* c) {
    Ep e;
    e.p_ = c;
    e.tls_ = c != nullptr;
    return e;
  }
  bool is_tls() const { return tls_; }
  // The UCX endpoint, or null for a TLS connection.
  ucp_ep* ucx() const { return tls_ ? nullptr : static_cast<ucp_ep*>(p_); }
  // The TLS connection, or null for a UCX endpoint.
  TlsConn* tls_conn() const { return tls_ ? static_cast<TlsConn*>(p_) : nullptr; }
  explicit operator bool() const { return p_ != nullptr; }
  bool operator==(const Ep& o) const { return p_ == o.p_; }
  auto operator<=>(const Ep& o) const { return std::compare_three_way()(p_, o.p_); }
  const void* key() const { return p_; }

private:
  void* p_ = nullptr;  // two live connections never share an address, whatever their transports
  bool tls_ = false;
};

}  // namespace xcargo::loader
