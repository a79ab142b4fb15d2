// xcargo-tls-floor-bench: what lies under a TLS invocation round trip on this machine, as
// scripts/bench-invoke prints it beside the loader's figures. One JSON line:
//   tcp_rtt_us      a raw TCP ping-pong over loopback (two threads, each polling its socket
//                   without sleeping, as a client and a worker do), invocation-sized messages
//   records_us      OpenSSL's share of one round trip: a request and a reply frame of an
//                   invocation's sizes through two tls::Channels over a socket pair, less
//                   the same bytes written and read plainly (one encryption and one
//                   decryption each way)
// Both are medians over -n round trips after 1000 warm-up ones.
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "net/tls.h"

using namespace xcargo;
using Clock = std::chrono::steady_clock;

namespace {

// Sizes of a warm invocation of hello/add on the wire: request and reply frames.
constexpr size_t kRequestHeader = 96, kRequestData = 8, kReplyHeader = 64, kReplyData = 8;

[[noreturn]] void die(const std::string& why) {
  std::fprintf(stderr, "xcargo-tls-floor-bench: %s\n", why.c_str());
  std::exit(1);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void spin_readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  while (::poll(&p, 1, 0) == 0) {
  }
}

// Reads exactly n bytes from a non-blocking socket, polling without sleeping.
void read_all(int fd, uint8_t* to, size_t n) {
  for (size_t got = 0; got < n;) {
    spin_readable(fd);
    const ssize_t r = ::read(fd, to + got, n - got);
    if (r == 0) die("the other end closed the socket");
    if (r > 0) got += size_t(r);
  }
}

void write_all(int fd, const uint8_t* p, size_t n) {
  for (size_t sent = 0; sent < n;) {
    const ssize_t w = ::write(fd, p + sent, n - sent);
    if (w > 0) sent += size_t(w);
  }
}

double tcp_rtt(int n) {
  const size_t req = wire::kFrameHeaderSize + kRequestHeader + kRequestData, rep = wire::kFrameHeaderSize + kReplyHeader + kReplyData;
  const int ls = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (::bind(ls, reinterpret_cast<sockaddr*>(&a), len) != 0 || ::listen(ls, 1) != 0 ||
      ::getsockname(ls, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    die(std::string("loopback listener: ") + std::strerror(errno));
  const int c = ::socket(AF_INET, SOCK_STREAM, 0);
  if (::connect(c, reinterpret_cast<sockaddr*>(&a), len) != 0) die(std::string("connect: ") + std::strerror(errno));
  const int s = ::accept(ls, nullptr, nullptr);
  ::close(ls);
  const int one = 1;
  for (int fd : {c, s}) {
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  }
  const int total = n + 1000;
  std::thread server([&] {
    std::vector<uint8_t> in(req), out(rep, 1);
    for (int i = 0; i < total; ++i) {
      read_all(s, in.data(), req);
      write_all(s, out.data(), rep);
    }
  });
  std::vector<uint8_t> out(req, 2), in(rep);
  std::vector<double> us;
  for (int i = 0; i < total; ++i) {
    const auto t = Clock::now();
    write_all(c, out.data(), req);
    read_all(c, in.data(), rep);
    if (i >= 1000) us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t).count());
  }
  server.join();
  ::close(c);
  ::close(s);
  return median(us);
}

std::shared_ptr<tls::Context> context(tls::Context::Role role, const SigningKey& k) {
  auto cred = tls::Credential::self_signed(k);
  if (!cred.ok()) die(cred.error().message());
  auto c = tls::Context::create(role, *cred, [](const tls::Peer&, std::string*) { return true; });
  if (!c.ok()) die(c.error().message());
  return *c;
}

// Receives one frame on a channel whose bytes are all in the socket already.
void take(tls::Channel& ch, wire::Frame& f) {
  for (;;) {
    auto io = ch.receive(f, 1 << 20);
    if (!io.ok()) die(io.error().message());
    if (*io == tls::Channel::Io::done) return;
    if (*io != tls::Channel::Io::want_read) die("the channel closed");
  }
}

double records(int n) {
  auto ck = SigningKey::generate(), sk = SigningKey::generate();
  if (!ck.ok() || !sk.ok()) die("cannot make keys");
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) die(std::string("socketpair: ") + std::strerror(errno));
  for (int fd : fds) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  auto client = tls::Channel::start(context(tls::Context::client, *ck), fds[0]);
  auto server = tls::Channel::start(context(tls::Context::server, *sk), fds[1]);
  if (!client.ok() || !server.ok()) die("cannot start the channels");
  tls::Channel &c = **client, &s = **server;
  for (int i = 0; i < 100 && !(c.ready() && s.ready()); ++i) {
    if (!c.ready()) (void)c.handshake();
    if (!s.ready()) (void)s.handshake();
  }
  if (!c.ready() || !s.ready()) die("the handshake did not finish");
  const Bytes qh(kRequestHeader, 3), qd(kRequestData, 4), rh(kReplyHeader, 5), rd(kReplyData, 6);
  wire::Frame f;
  const int total = n + 1000;
  std::vector<double> sealed, plain;
  std::vector<uint8_t> buf(4096);
  const size_t req = wire::kFrameHeaderSize + kRequestHeader + kRequestData, rep = wire::kFrameHeaderSize + kReplyHeader + kReplyData;
  for (int i = 0; i < total; ++i) {  // the two alternate: each pair of figures from one moment
    auto t = Clock::now();
    if (!c.send(wire::MsgType::invoke, qh, qd).ok()) die("send failed");
    take(s, f);
    if (!s.send(wire::MsgType::result, rh, rd).ok()) die("send failed");
    take(c, f);
    const double a = std::chrono::duration<double, std::micro>(Clock::now() - t).count();
    t = Clock::now();
    write_all(fds[0], buf.data(), req);
    read_all(fds[1], buf.data(), req);
    write_all(fds[1], buf.data(), rep);
    read_all(fds[0], buf.data(), rep);
    const double b = std::chrono::duration<double, std::micro>(Clock::now() - t).count();
    if (i >= 1000) sealed.push_back(a), plain.push_back(b);
  }
  return median(sealed) - median(plain);
}

}  // namespace

int main(int argc, char** argv) {
  int n = 20000;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "-n") n = std::max(1, std::atoi(argv[i + 1]));
  const double tcp = tcp_rtt(n), rec = records(n);
  std::printf("{\"tcp_rtt_us\": %.3f, \"records_us\": %.3f}\n", tcp, rec);
  return 0;
}
