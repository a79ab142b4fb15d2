// UCX context/worker creation, address parsing and event-fd based blocking.
#include "net/ucx.h"

#include "net/door.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

namespace xcargo::net {

Error ucx_error(const std::string& what, ucs_status_t status) {
  return Error(Errc::unreachable, what + ": " + (UCX ? UCX->ucs_status_string(status) : "UCX unavailable"));
}

namespace {

// UCX 1.13's transport names and aliases (ucx_info -d lists the devices each has here).
constexpr std::string_view kTransports[] = {
    "all", "tcp", "sm", "shm", "posix", "sysv", "cma", "knem", "xpmem", "self", "mm", "ib", "rc", "rc_v", "rc_x",
    "rc_verbs", "rc_mlx5", "ud", "ud_v", "ud_x", "ud_verbs", "ud_mlx5", "dc", "dc_x", "dc_mlx5", "cuda", "cuda_copy",
    "cuda_ipc", "gdr_copy", "rocm", "rocm_copy", "rocm_ipc", "rocm_gdr", "ugni", "rdmacm", "sockcm", "mlx5"};

// A failed ucp_init: when the settings the user gave (UCX_TLS, UCX_NET_DEVICES) leave UCX no
// transport, one line that says what was asked, instead of UCX's "No such device".
Error init_error(ucs_status_t s) {
  const char* tls = std::getenv("UCX_TLS");
  const char* devices = std::getenv("UCX_NET_DEVICES");
  if ((s != UCS_ERR_NO_DEVICE && s != UCS_ERR_NO_ELEM) || ((!tls || !*tls) && (!devices || !*devices)))
    return ucx_error("UCX initialization", s);
  std::string asked, unknown;
  if (tls && *tls) {
    asked = std::string("UCX_TLS=") + tls;
    std::string_view rest(tls);
    if (!rest.empty() && rest[0] == '^') rest.remove_prefix(1);
    while (!rest.empty()) {
      const size_t comma = rest.find(',');
      std::string_view name = rest.substr(0, comma);
      if (name.ends_with(":aux")) name.remove_suffix(4);
      if (!name.empty() && std::find(std::begin(kTransports), std::end(kTransports), name) == std::end(kTransports))
        unknown += (unknown.empty() ? "'" : ", '") + std::string(name) + "'";
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    }
  }
  if (devices && *devices) asked += (asked.empty() ? "" : " with ") + std::string("UCX_NET_DEVICES=") + devices;
  Error e(Errc::invalid_argument, asked + ": UCX finds no usable transport" +
                                      (unknown.empty() ? "" : " (" + unknown + " is no UCX transport)"));
  e.hint("'ucx_info -d' lists the transports and devices of this machine; e.g. UCX_TLS=tcp or UCX_TLS=shm,tcp");
  if (devices && *devices) e.hint("UCX_NET_DEVICES names network devices as 'ip link' shows them, e.g. lo or eth0");
  return e;
}

}  // namespace

bool is_loopback(const sockaddr_storage& a) {
  return a.ss_family == AF_INET && (ntohl(reinterpret_cast<const sockaddr_in&>(a).sin_addr.s_addr) >> 24) == 127;
}

bool on_this_host(const sockaddr_storage& a) {
  if (a.ss_family != AF_INET) return false;
  const in_addr_t ip = reinterpret_cast<const sockaddr_in&>(a).sin_addr.s_addr;
  if (is_loopback(a)) return true;
  ifaddrs* all = nullptr;
  if (::getifaddrs(&all) != 0) return false;
  bool mine = false;
  for (ifaddrs* i = all; i && !mine; i = i->ifa_next)
    mine = i->ifa_addr && i->ifa_addr->sa_family == AF_INET && reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr == ip;
  ::freeifaddrs(all);
  return mine;
}

Result<sockaddr_storage> parse_host_port(const std::string& hp, socklen_t* len) {
  std::string host = hp, port;
  bool v6 = false;
  if (!hp.empty() && hp[0] == '[') {  // [IPv6] or [IPv6]:PORT
    auto close = hp.find(']');
    if (close == std::string::npos || (close + 1 < hp.size() && hp[close + 1] != ':'))
      return Error(Errc::invalid_argument, "'" + hp + "' is not [IPv6]:PORT").hint("for example [::1]:7400");
    host = hp.substr(1, close - 1);
    if (close + 1 < hp.size()) port = hp.substr(close + 2);
    v6 = true;
    // Tried with UCX 1.13 on loopback: its tcp transport then connects its lanes to ports
    // nobody listens on, and sandboxed workers abort in malloc at the first connection.
    return Error(Errc::invalid_argument, "'" + hp + "': IPv6 addresses do not work with this UCX (1.13)")
        .hint("use an IPv4 address or a host name that resolves to one, e.g. 127.0.0.1:7400");
  } else if (auto colon = hp.rfind(':'); colon != std::string::npos) {
    if (hp.find(':') != colon)
      return Error(Errc::invalid_argument, "'" + hp + "': IPv6 addresses do not work with this UCX (1.13)")
          .hint("use an IPv4 address or a host name that resolves to one, e.g. 127.0.0.1:7400");
    host = hp.substr(0, colon);
    port = hp.substr(colon + 1);
  }
  if (host.empty() || (port.empty() && hp.back() == ':'))
    return Error(Errc::invalid_argument, "'" + hp + "' is not HOST:PORT").hint("for example 127.0.0.1:7400, or HOST alone for port 7400");
  unsigned p = kDefaultPort;
  if (!port.empty()) {
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
    if (ec != std::errc() || end != port.data() + port.size() || p > 65535)
      return Error(Errc::invalid_argument, "'" + hp + "': port must be a number from 0 to 65535");
  }
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = v6 ? AF_INET6 : AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  if (v6) hints.ai_flags = AI_NUMERICHOST;
  if (int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &res); rc != 0 || !res)
    return Error(v6 ? Errc::invalid_argument : Errc::unreachable, "'" + host + "': cannot resolve: " + gai_strerror(rc));
  sockaddr_storage ss{};
  std::memcpy(&ss, res->ai_addr, res->ai_addrlen);
  if (v6) reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port = htons(uint16_t(p));
  else reinterpret_cast<sockaddr_in*>(&ss)->sin_port = htons(uint16_t(p));
  if (len) *len = socklen_t(res->ai_addrlen);
  ::freeaddrinfo(res);
  return ss;
}

std::string to_host_port(const sockaddr* addr) {
  char host[INET6_ADDRSTRLEN] = "?";
  unsigned port = 0;
  if (addr->sa_family == AF_INET) {
    auto* in = reinterpret_cast<const sockaddr_in*>(addr);
    ::inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
    port = ntohs(in->sin_port);
  } else if (addr->sa_family == AF_INET6) {
    auto* in6 = reinterpret_cast<const sockaddr_in6*>(addr);
    ::inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
    port = ntohs(in6->sin6_port);
  }
  if (addr->sa_family == AF_INET6) return "[" + std::string(host) + "]:" + std::to_string(port);
  return std::string(host) + ":" + std::to_string(port);
}

namespace {
// Which shared-memory transports a UCX_TLS value (null or empty: UCX's default, all) lets
// UCX use.
struct ShmTransports {
  bool posix = true, sysv = true;
};
ShmTransports shm_transports(const char* tls) {
  if (!tls || !*tls) return {};
  const std::string_view all(tls);
  const bool exclusion = all[0] == '^';
  bool posix = false, sysv = false;  // named in the list
  std::string_view rest = exclusion ? all.substr(1) : all;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    std::string_view t = rest.substr(0, comma);
    if (t.ends_with(":aux")) t.remove_suffix(4);
    if (t == "all" || t == "sm" || t == "shm" || t == "mm") posix = sysv = true;
    if (t == "posix") posix = true;
    if (t == "sysv") sysv = true;
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
  }
  if (exclusion) return {!posix, !sysv};
  return {posix, sysv};
}
}  // namespace

bool shm_enabled() {
  const ShmTransports t = shm_transports(std::getenv("UCX_TLS"));
  return t.posix || t.sysv;
}

bool sysv_enabled(const char* ucx_tls) { return shm_transports(ucx_tls).sysv; }

Result<std::unique_ptr<UcxWorker>> UcxWorker::create(bool listener, bool rma, bool loopback_only, bool shm) {
  const char* why = nullptr;
  if (!ucx_api(&why)) return Error(Errc::unreachable, why).hint("install UCX (Debian package libucx0)");
  auto w = std::unique_ptr<UcxWorker>(new UcxWorker());
  // A restarted loader must get its port back although the old one's connections linger.
  // These are settings of UCT's connection managers, which read only the environment.
  if (listener) {
    ::setenv("UCX_TCP_CM_REUSEADDR", "y", 0);
    ::setenv("UCX_RDMA_CM_REUSEADDR", "y", 0);
  }
  ucp_config_t* config = nullptr;
  if (auto s = UCX->ucp_config_read(nullptr, nullptr, &config); s != UCS_OK) return ucx_error("UCX configuration", s);
  // Endpoints ask for peer-failure detection; without this UCX leaves the shared-memory
  // transports out of such endpoints (openucx/ucx#8477) and same-host peers talk over TCP.
  // Off, that leaves shared memory out of every endpoint (the `shm` argument).
  if (!shm) UCX->ucp_config_modify(config, "MM_ERROR_HANDLING", "n");
  else if (!std::getenv("UCX_MM_ERROR_HANDLING") && shm_enabled()) UCX->ucp_config_modify(config, "MM_ERROR_HANDLING", "y");
  if (const char* d = std::getenv("UCX_NET_DEVICES"); loopback_only && !(d && *d))
    if (auto s = UCX->ucp_config_modify(config, "NET_DEVICES", "lo"); s != UCS_OK) {
      UCX->ucp_config_release(config);
      return ucx_error("UCX configuration (NET_DEVICES=lo)", s);
    }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP | (rma ? UCP_FEATURE_RMA : 0);
  ucs_status_t s = UCX->ucp_init_version(UCP_API_MAJOR, UCP_API_MINOR, &params, config, &w->context_);
  UCX->ucp_config_release(config);
  if (s != UCS_OK) return init_error(s);
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SINGLE;
  if (s = UCX->ucp_worker_create(w->context_, &wp, &w->worker_); s != UCS_OK) return ucx_error("UCX worker", s);
  if (s = UCX->ucp_worker_get_efd(w->worker_, &w->efd_); s != UCS_OK) return ucx_error("UCX event descriptor", s);
  w->epfd_ = ::epoll_create1(EPOLL_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = w->efd_;
  ::epoll_ctl(w->epfd_, EPOLL_CTL_ADD, w->efd_, &ev);
  w->wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  ev.data.fd = w->wake_fd_;
  ::epoll_ctl(w->epfd_, EPOLL_CTL_ADD, w->wake_fd_, &ev);
  return w;
}

bool door_route(const sockaddr_storage& a) { return is_loopback(a) && sysv_enabled(std::getenv("UCX_TLS")); }

UcxWorker::~UcxWorker() {
  if (epfd_ >= 0) ::close(epfd_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
  if (worker_) UCX->ucp_worker_destroy(worker_);
  if (context_) UCX->ucp_cleanup(context_);
}

Status UcxWorker::watch(int fd) {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = fd;
  if (::epoll_ctl(epfd_, EPOLL_CTL_ADD, fd, &ev) != 0)
    return Error(Errc::io, std::string("cannot wait for another transport's events: ") + std::strerror(errno));
  return {};
}

void UcxWorker::unwatch(int fd) { ::epoll_ctl(epfd_, EPOLL_CTL_DEL, fd, nullptr); }

bool UcxWorker::progress_or_wait(int timeout_ms) {
  while (UCX->ucp_worker_progress(worker_) != 0) {
  }
  ucs_status_t s = UCX->ucp_worker_arm(worker_);
  if (s == UCS_ERR_BUSY) return true;  // events arrived meanwhile: progress again
  epoll_event ev[4];
  int n = ::epoll_wait(epfd_, ev, 4, timeout_ms);
  for (int i = 0; i < n; ++i)
    if (ev[i].data.fd == wake_fd_) {
      uint64_t v;
      while (::read(wake_fd_, &v, sizeof v) > 0) {
      }
    }
  return n >= 0;
}

namespace {
// Creates an endpoint from p with peer failure detection, and on_error if given.
ucs_status_t create_ep(ucp_worker_h worker, ucp_ep_params_t& p, ucp_err_handler_cb_t on_error, void* arg, ucp_ep_h* ep) {
  p.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
  p.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  if (on_error) {
    p.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLER;
    p.err_handler.cb = on_error;
    p.err_handler.arg = arg;
  }
  return UCX->ucp_ep_create(worker, &p, ep);
}
}  // namespace

Result<ucp_ep_h> connect_ep(ucp_worker_h worker, const std::string& host_port, ucp_err_handler_cb_t on_error, void* arg) {
  socklen_t len = 0;
  auto addr = parse_host_port(host_port, &len);
  XC_TRY(addr);
  ucp_ep_params_t p{};
  p.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR;
  p.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
  p.sockaddr.addr = reinterpret_cast<const sockaddr*>(&*addr);
  p.sockaddr.addrlen = len;
  ucp_ep_h ep = nullptr;
  if (ucs_status_t s = create_ep(worker, p, on_error, arg, &ep); s != UCS_OK)
    return Error(Errc::unreachable, "could not reach " + host_port + ": " + UCX->ucs_status_string(s));
  return ep;
}

Result<ucp_ep_h> connect_address(ucp_worker_h worker, ByteView address, ucp_err_handler_cb_t on_error, void* arg) {
  ucp_ep_params_t p{};
  p.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
  p.address = reinterpret_cast<const ucp_address_t*>(address.data());
  ucp_ep_h ep = nullptr;
  if (ucs_status_t s = create_ep(worker, p, on_error, arg, &ep); s != UCS_OK)
    return Error(Errc::unreachable, std::string("no UCX transport reaches the loader's worker: ") + UCX->ucs_status_string(s))
        .hint("the same-host door offers shared memory: let UCX use it (UCX_TLS with shm or sysv, or unset)");
  return ep;
}

Status send_claim(ucp_ep_h ep, ByteView ticket) {
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  p.flags = UCP_AM_SEND_FLAG_REPLY;
  ucs_status_ptr_t r = UCX->ucp_am_send_nbx(ep, door::kClaimMessage, ticket.data(), ticket.size(), nullptr, 0, &p);
  if (UCS_PTR_IS_ERR(r)) return Error(Errc::unreachable, std::string("send failed: ") + UCX->ucs_status_string(UCS_PTR_STATUS(r)));
  if (r) UCX->ucp_request_free(r);  // completes on its own
  return {};
}

Result<ucp_listener_h> listen(ucp_worker_h worker, const std::string& host_port, ucp_listener_conn_callback_t on_conn,
                              void* arg, std::string* bound) {
  socklen_t len = 0;
  auto addr = parse_host_port(host_port, &len);
  XC_TRY(addr);
  ucp_listener_params_t lp{};
  lp.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
  lp.sockaddr.addr = reinterpret_cast<const sockaddr*>(&*addr);
  lp.sockaddr.addrlen = len;
  lp.conn_handler.cb = on_conn;
  lp.conn_handler.arg = arg;
  ucp_listener_h listener = nullptr;
  if (ucs_status_t s = UCX->ucp_listener_create(worker, &lp, &listener); s != UCS_OK)
    return Error(Errc::io, "cannot listen on " + host_port + ": " + UCX->ucs_status_string(s))
        .hint("is something else using that port? port 0 picks a free one");
  if (bound) {
    ucp_listener_attr_t attr{};
    attr.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
    *bound = UCX->ucp_listener_query(listener, &attr) == UCS_OK ? to_host_port(reinterpret_cast<sockaddr*>(&attr.sockaddr))
                                                                : host_port;
  }
  return listener;
}

Result<ucp_ep_h> accept_ep(ucp_worker_h worker, ucp_conn_request_h request, ucp_err_handler_cb_t on_error, void* arg) {
  ucp_ep_params_t p{};
  p.field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST;
  p.conn_request = request;
  ucp_ep_h ep = nullptr;
  if (ucs_status_t s = create_ep(worker, p, on_error, arg, &ep); s != UCS_OK)
    return Error(Errc::unreachable, std::string("refused a connection: ") + UCX->ucs_status_string(s));
  return ep;
}

Result<Bytes> UcxWorker::address() const {
  ucp_address_t* a = nullptr;
  size_t len = 0;
  if (ucs_status_t s = UCX->ucp_worker_get_address(worker_, &a, &len); s != UCS_OK) return ucx_error("UCX worker address", s);
  const auto* p = reinterpret_cast<const uint8_t*>(a);
  Bytes out(p, p + len);
  UCX->ucp_worker_release_address(worker_, a);
  return out;
}

std::vector<std::string> UcxWorker::transports() const {
  // UCX lists its resources only as text: "#      resource 2  :  md 1  dev 2  flags -- tcp/lo".
  char* text = nullptr;
  size_t size = 0;
  FILE* f = ::open_memstream(&text, &size);
  if (!f) return {};
  UCX->ucp_context_print_info(context_, f);
  std::fclose(f);
  std::vector<std::string> out;
  std::string all(text, size);
  std::free(text);
  for (size_t pos = 0; (pos = all.find("resource ", pos)) != std::string::npos;) {
    const size_t eol = std::min(all.find('\n', pos), all.size());
    const size_t dash = all.find("-- ", pos);
    pos = eol;
    if (dash == std::string::npos || dash > eol) continue;
    std::string tl = all.substr(dash + 3, eol - dash - 3);
    tl = tl.substr(0, tl.find('/'));
    if (!tl.empty() && std::find(out.begin(), out.end(), tl) == out.end()) out.push_back(tl);
  }
  return out;
}

bool enforces_memory_keys(const std::string& tl) {
  for (const char* hw : {"rc", "dc", "ud"})
    if (tl == hw || tl.rfind(std::string(hw) + "_", 0) == 0) return true;
  return false;
}

Result<std::string> tls_without(const char* tls, const std::vector<std::string>& drop) {
  const std::string in = tls ? tls : "";
  std::vector<std::string> tokens;
  for (size_t at = 0; at <= in.size();) {
    const size_t comma = std::min(in.find(',', at), in.size());
    if (comma > at) tokens.push_back(in.substr(at, comma - at));
    at = comma + 1;
  }
  auto listed = [](const std::vector<std::string>& v, const std::string& t) { return std::find(v.begin(), v.end(), t) != v.end(); };
  std::vector<std::string> out;
  auto add = [&](const std::string& t) {
    if (!listed(drop, t) && !listed(out, t)) out.push_back(t);
  };
  const bool exclusion = !tokens.empty() && tokens[0][0] == '^';
  if (tokens.empty() || listed(tokens, "all") || exclusion) {
    if (exclusion) tokens[0].erase(0, 1);
    else tokens.clear();
    out = tokens;
    for (const std::string& t : drop)
      if (!listed(out, t)) out.push_back(t);
  } else {
    for (const std::string& t : tokens) {
      if (t == "shm" || t == "sm")
        for (const char* a : {"posix", "sysv", "cma", "knem", "xpmem"}) add(a);
      else if (t == "mm")
        for (const char* a : {"posix", "sysv", "xpmem"}) add(a);
      else
        add(t);
    }
    if (out.empty())
      return Error(Errc::invalid_argument, "UCX_TLS=" + in + ": nothing left once the loader leaves out what it may not use")
          .hint("add tcp (the loader serves tcp always; shared memory as loader/SECURITY.md says)");
  }
  std::string joined = exclusion || tokens.empty() || listed(tokens, "all") ? "^" : "";
  for (size_t i = 0; i < out.size(); ++i) joined += (i ? "," : "") + out[i];
  return joined;
}

void UcxWorker::wake() {
  const uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof one);
}

}  // namespace xcargo::net
