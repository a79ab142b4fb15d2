// The key service's process: start, the worker connections it is handed, its loop.
#include "keys/key_service.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "sandbox/processes.h"
#include "keys/node_key.h"
#include "keys/protocol.h"
#include "xcargo/identity.h"

namespace xcargo::loader::keys {

namespace {

// What the service tells start(), one packet: "K" and the raw public key, or "E", the error
// code's byte, then its message and hints, one per line.
constexpr size_t kMaxStartPacket = 4096;

void send_packet(int fd, const std::string& p) { (void)!::send(fd, p.data(), p.size(), MSG_NOSIGNAL); }

std::string error_packet(const Error& e) {
  std::string p = "E";
  p += char(uint8_t(e.code()));
  p += e.message();
  for (const std::string& h : e.hints()) p += "\n" + h;
  return p.substr(0, kMaxStartPacket);
}

Error error_from(const std::string& p) {
  std::vector<std::string> lines;
  size_t at = 2;
  for (size_t nl; (nl = p.find('\n', at)) != std::string::npos; at = nl + 1) lines.push_back(p.substr(at, nl - at));
  lines.push_back(p.substr(at));
  Error e(Errc(uint8_t(p[1])), lines[0]);
  for (size_t i = 1; i < lines.size(); ++i) e.hint(lines[i]);
  return e;
}

[[noreturn]] void run_service(int fd, const std::string& path, const PassphraseSource& passphrase, const KeyService::Confine& confine,
                              bool client_proofs) {
  auto key = path.empty() ? SigningKey::generate() : SigningKey::load(path, passphrase);
  forget_passphrase_env(passphrase);
  if (!key.ok()) {
    send_packet(fd, error_packet(key.take_error().within("node-key")));
    _exit(1);
  }
  if (const int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC); null >= 0) {  // stdout: nothing to say there
    ::dup2(null, 1);
    ::close(null);
  }
  if (confine)
    if (Status s = confine(fd); !s.ok()) {
      send_packet(fd, error_packet(Error(s.error().code(), "the key service's sandbox: " + s.error().message(), s.error().hints())));
      _exit(1);
    }
  const HeldKey held(std::move(*key));
  const auto& raw = held.public_key().raw;
  send_packet(fd, "K" + std::string(raw.begin(), raw.end()));
  _exit(serve(fd, held, client_proofs));
}

}  // namespace

Result<KeyService> KeyService::start(const std::string& path, const PassphraseSource& passphrase, const Confine& confine,
                                     bool client_proofs) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
    return Error(Errc::io, std::string("key service: socketpair failed: ") + std::strerror(errno));
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(sv[0]);
    ::close(sv[1]);
    return Error(Errc::io, std::string("key service: fork failed: ") + std::strerror(errno));
  }
  if (pid == 0) {
    // Before the key is read: a process of the same user (a worker) cannot ptrace a process
    // that is not dumpable, nor open its /proc/PID/mem.
    ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    ::prctl(PR_SET_NAME, "xcargo-keys");
    ::close(sv[0]);
    if (::getppid() == 1) _exit(1);
    run_service(sv[1], path, passphrase, confine, client_proofs);
  }
  ::close(sv[1]);
  char p[kMaxStartPacket];
  ssize_t n;
  while ((n = ::recv(sv[0], p, sizeof p, 0)) < 0 && errno == EINTR) {
  }
  const std::string said = n > 0 ? std::string(p, size_t(n)) : std::string();
  if (said.size() == 33 && said[0] == 'K') {
    PublicKey key;
    std::memcpy(key.raw.data(), said.data() + 1, 32);
    key.id = key_id_of(key.raw);
    key.source = path.empty() ? "a new node key" : path;
    return KeyService(pid, sv[0], std::move(key));
  }
  ::close(sv[0]);
  int ws = 0;
  while (::waitpid(pid, &ws, 0) < 0 && errno == EINTR) {
  }
  if (said.size() >= 2 && said[0] == 'E') return error_from(said);
  return Error(Errc::io, "the key service ended before it loaded the node key (" + sandbox::exit_text(ws) + ")");
}

KeyService::KeyService(KeyService&& o) noexcept
    : pid_(o.pid_), control_(o.control_), public_(std::move(o.public_)), connections_(o.connections_) {
  o.pid_ = -1;
  o.control_ = -1;
}

KeyService::~KeyService() {
  if (control_ >= 0) ::close(control_);
  if (pid_ <= 0) return;
  // It ends when its control connection closes; a second at most, then it is killed.
  (void)sandbox::reap_within(pid_, std::chrono::seconds(1));
}

Result<KeyService::Connection> KeyService::connect() {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
    return Error(Errc::io, std::string("key service: socketpair failed: ") + std::strerror(errno));
  const bool sent = sandbox::send_fd(control_, sv[1], "c");
  const int err = errno;
  ::close(sv[1]);
  if (!sent) {
    ::close(sv[0]);
    return Error(Errc::io, std::string("the key service cannot be reached: ") + std::strerror(err));
  }
  return Connection{sv[0], ++connections_};
}

void KeyService::disconnect(uint64_t id) {
  std::string p = "d";
  for (int i = 0; i < 8; ++i) p += char(uint8_t(id >> (8 * i)));
  send_packet(control_, p);
}

bool KeyService::alive(std::string* why) {
  if (pid_ <= 0) return false;
  int ws = 0;
  const pid_t r = ::waitpid(pid_, &ws, WNOHANG);
  if (r == 0 || (r < 0 && errno == EINTR)) return true;
  if (why) *why = r == pid_ ? sandbox::exit_text(ws) : std::string("lost: ") + std::strerror(errno);
  pid_ = -1;
  return false;
}

int serve(int control_fd, const NodeKey& key, bool client_proofs) {
  struct Conn {
    uint64_t id;
    int fd;
  };
  std::vector<Conn> conns;  // oldest first
  uint64_t made = 0;
  std::vector<pollfd> fds;
  uint8_t packet[protocol::kMaxPacket + 1];
  auto close_where = [&](auto pred) {
    std::erase_if(conns, [&](const Conn& c) { return pred(c) && (::close(c.fd), true); });
  };
  for (;;) {
    fds.assign(1, {control_fd, POLLIN, 0});
    for (const Conn& c : conns) fds.push_back({c.fd, POLLIN | POLLRDHUP, 0});
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      return 1;
    }
    // A worker's connection: one request each round, so that one worker's flood does not
    // starve another's handshakes.
    std::vector<int> gone;
    for (size_t i = 1; i < fds.size(); ++i) {
      if (!fds[i].revents) continue;
      const int fd = fds[i].fd;
      const ssize_t n = (fds[i].revents & POLLIN) ? ::recv(fd, packet, sizeof packet, MSG_DONTWAIT | MSG_TRUNC) : -1;
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      // Closed (its worker ended), shut down for writing (a kernel did: the end of its input
      // then reads as ready for ever, and the service spun), or an error. A packet of no bytes
      // reads as 0 too: it is that only while the other end still writes.
      if (n < 0 || (n == 0 && (fds[i].revents & (POLLHUP | POLLRDHUP | POLLERR)))) {
        gone.push_back(fd);
        continue;
      }
      // MSG_TRUNC gave the packet's whole length: one longer than any request is refused.
      const Bytes reply = size_t(n) > protocol::kMaxPacket
                              ? protocol::refusal(0, "a request of " + std::to_string(n) + " bytes, longer than any the key service answers")
                              : protocol::answer(key, ByteView(packet, size_t(n)), client_proofs);
      // A worker that does not read its answers loses them, not the service its time.
      (void)!::send(fd, reply.data(), reply.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    }
    close_where([&](const Conn& c) { return std::find(gone.begin(), gone.end(), c.fd) != gone.end(); });
    if (!fds[0].revents) continue;
    // The supervisor: a new worker's connection ("c" and its descriptor), or the end of a
    // worker ("d" and its connection's id, little-endian u64).
    char msg[16];
    int fd;
    const ssize_t n = sandbox::receive_fd(control_fd, msg, sizeof msg, &fd);
    if (n <= 0) return 0;  // the supervisor closed it, or ended
    if (msg[0] == 'c' && fd >= 0) {
      if (conns.size() >= kMaxConnections) {
        const uint64_t oldest = conns.front().id;
        close_where([&](const Conn& c) { return c.id == oldest; });
      }
      conns.push_back({++made, fd});
    } else if (fd >= 0) {
      ::close(fd);
    }
    if (msg[0] == 'd' && n == 9) {
      uint64_t id = 0;
      for (int i = 0; i < 8; ++i) id |= uint64_t(uint8_t(msg[1 + i])) << (8 * i);
      close_where([&](const Conn& c) { return c.id == id; });
    }
  }
}

}  // namespace xcargo::loader::keys
