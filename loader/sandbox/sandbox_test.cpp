// The sandbox, each rule tried in a child process of its own (filters cannot be removed).
#include "sandbox/sandbox.h"

#include <catch2/catch.hpp>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <thread>

using namespace xcargo::loader;

namespace {

// Runs body in a sandboxed child; returns its wait status. body returns the exit code.
int in_child(const sandbox::Options& o, const std::function<int()>& body) {
  pid_t pid = ::fork();
  if (pid == 0) {
    if (!sandbox::prepare(o, {0, 1, 2}).ok()) _exit(90);
    if (!sandbox::lock_down(o).ok()) _exit(91);
    _exit(body());
  }
  int ws = 0;
  ::waitpid(pid, &ws, 0);
  return ws;
}

bool exited_ok(int ws) { return WIFEXITED(ws) && WEXITSTATUS(ws) == 0; }
bool killed_by_sigsys(int ws) { return WIFSIGNALED(ws) && WTERMSIG(ws) == SIGSYS; }

}  // namespace

TEST_CASE("the worker's own calls still work in the sandbox", "[sandbox]") {
  CHECK(exited_ok(in_child({}, [] {
    if (::getpid() <= 0) return 1;
    int s = ::socket(AF_INET, SOCK_STREAM, 0);  // UCX connects to peers and clients
    if (s < 0) return 2;
    ::close(s);
    void* p = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED || ::mprotect(p, 4096, PROT_READ | PROT_EXEC) != 0) return 3;  // the JIT
    int v = 0;
    std::thread t([&] { v = 1; });  // threads: clone3 refused, clone with thread flags allowed
    t.join();
    return v == 1 ? 0 : 4;
  })));
}

TEST_CASE("the sandbox refuses execve, fork, ptrace and odd sockets even from the C library", "[sandbox]") {
  CHECK(killed_by_sigsys(in_child({}, [] {
    char* const argv[] = {const_cast<char*>("/bin/true"), nullptr};
    ::execv("/bin/true", argv);
    return 0;
  })));
  CHECK(killed_by_sigsys(in_child({}, [] {
    pid_t p = ::fork();
    if (p == 0) _exit(0);
    return 0;
  })));
  CHECK(killed_by_sigsys(in_child({}, [] {
    ::socket(AF_PACKET, SOCK_RAW, 0);
    return 0;
  })));
  CHECK(killed_by_sigsys(in_child({}, [] {
    ::kill(1, 0);  // signals only to this process
    return 0;
  })));
}

TEST_CASE("no new Unix socket once locked down", "[sandbox]") {
  // A kernel passed its worker's connection to the key service to a process outside the
  // loader, through a Unix socket of its own.
  CHECK(exited_ok(in_child({}, [] {
    errno = 0;
    if (::socket(AF_UNIX, SOCK_STREAM, 0) != -1 || errno != EPERM) return 1;
    int sv[2];
    errno = 0;
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) != -1 || errno != EPERM) return 2;
    const int s = ::socket(AF_INET, SOCK_STREAM, 0);  // UCX's still works
    if (s < 0) return 3;
    ::close(s);
    return 0;
  })));
}

TEST_CASE("without sockets, no socket, connect or bind of the process's own", "[sandbox]") {
  sandbox::Options o;
  o.sockets = false;  // a worker without trusted-network: the keepers make its connections
  for (int family : {AF_INET, AF_INET6, AF_NETLINK})
    CHECK(killed_by_sigsys(in_child(o, [family] {
      ::socket(family, SOCK_STREAM, 0);
      return 0;
    })));
  CHECK(killed_by_sigsys(in_child(o, [] {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    ::connect(0, reinterpret_cast<sockaddr*>(&a), sizeof a);  // on any descriptor: the call itself is refused
    return 0;
  })));
  CHECK(killed_by_sigsys(in_child(o, [] {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    ::bind(0, reinterpret_cast<sockaddr*>(&a), sizeof a);
    return 0;
  })));
  CHECK(killed_by_sigsys(in_child(o, [] {  // it could carry descriptors out (SCM_RIGHTS)
    msghdr m{};
    ::sendmsg(0, &m, 0);
    return 0;
  })));
}

TEST_CASE("no sending with MSG_FASTOPEN, which connects without connect()", "[sandbox]") {
  for (bool sockets : {false, true}) {
    sandbox::Options o;
    o.sockets = sockets;
    CHECK(killed_by_sigsys(in_child(o, [] {
      sockaddr_in a{};
      a.sin_family = AF_INET;
      ::sendto(0, "x", 1, MSG_FASTOPEN, reinterpret_cast<sockaddr*>(&a), sizeof a);
      return 0;
    })));
  }
}

TEST_CASE("with sockets, TCP ports are bound only where allowed, and no datagram socket", "[sandbox]") {
  // Two free ports: one the rules allow (the loader's listen port), one they do not.
  auto free_port = [] {
    const int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    REQUIRE(::bind(s, reinterpret_cast<sockaddr*>(&a), len) == 0);
    REQUIRE(::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len) == 0);
    ::close(s);
    return ntohs(a.sin_port);
  };
  const uint16_t allowed = free_port(), other = free_port();
  sandbox::Options o;
  o.confine = true;
  o.start_files.read = {"/usr/lib", "/lib", "/proc"};
  o.serve_files = o.start_files;
  o.serve_files.tcp_bind = std::vector<uint16_t>{allowed};
  const bool net_rules = sandbox::landlock_abi() >= 4;
  CHECK(exited_ok(in_child(o, [&] {
    auto bind_to = [](uint16_t port) {
      const int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (s < 0) return -2;
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      a.sin_port = htons(port);
      const int r = ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
      const int e = errno;
      ::close(s);
      return r == 0 ? 0 : e;
    };
    if (bind_to(allowed) != 0) return 1;
    if (net_rules && bind_to(other) != EACCES) return 2;
    return 0;
  })));
  CHECK(killed_by_sigsys(in_child(o, [] {
    ::socket(AF_INET, SOCK_DGRAM, 0);
    return 0;
  })));
}

TEST_CASE("no kernel pushes characters into a terminal's input", "[sandbox]") {
  // A pipe is no terminal: the kernel answers ENOTTY; refused by the filter, EPERM, with the
  // request's high bits set too (the kernel reads 32 bits). Other requests pass.
  CHECK(exited_ok(in_child({}, [] {
    int p[2];
    if (::pipe(p) != 0) return 1;
    char c = 'x';
    int n = 0;
    errno = 0;
    if (::syscall(SYS_ioctl, p[1], (unsigned long)TIOCSTI, &c) != -1 || errno != EPERM) return 2;
    errno = 0;
    if (::syscall(SYS_ioctl, p[1], 0xffffffff00000000ul | TIOCSTI, &c) != -1 || errno != EPERM) return 3;
    if (::ioctl(p[0], FIONREAD, &n) != 0) return 4;
    errno = 0;
    char termios[256];
    if (::ioctl(p[0], TCGETS, termios) != -1 || errno != ENOTTY) return 5;  // below TIOCSTI: the kernel's answer
    return 0;
  })));
}

#if defined(__x86_64__)
TEST_CASE("a system call made by code outside any file is refused", "[sandbox]") {
  // mov eax, 39 (getpid); syscall; ret: harmless, and still refused from JIT-like memory
  static const unsigned char code[] = {0xb8, 0x27, 0x00, 0x00, 0x00, 0x0f, 0x05, 0xc3};
  auto run_code = [] {
    void* p = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    std::memcpy(p, code, sizeof code);
    ::mprotect(p, 4096, PROT_READ | PROT_EXEC);
    return int(reinterpret_cast<long (*)()>(p)() > 0 ? 0 : 1);
  };
  CHECK(killed_by_sigsys(in_child({}, run_code)));
  sandbox::Options off;
  off.syscall_filter = false;
  CHECK(exited_ok(in_child(off, run_code)));  // the filters are what stop it
}
#endif

#if !defined(__SANITIZE_ADDRESS__)
TEST_CASE("the address-space limit makes large allocations fail", "[sandbox]") {
  sandbox::Options o;
  o.address_space = 2ull << 30;
  CHECK(exited_ok(in_child(o, [] {
    void* big = std::malloc(3ull << 30);
    void* small = std::malloc(1 << 20);
    return big == nullptr && small != nullptr ? 0 : 1;
  })));
}
#endif

TEST_CASE("confined, the worker reaches only the files it is given, without capabilities", "[sandbox]") {
  char dir_template[] = "/tmp/xcargo-sandbox-XXXXXX";
  REQUIRE(::mkdtemp(dir_template));
  const std::string dir = dir_template, inside = dir + "/inside", outside = "/tmp/xcargo-sandbox-outside-" + std::to_string(::getpid());
  sandbox::Options o;
  o.confine = true;
  o.start_files.read = {"/usr/lib", "/lib", "/proc"};
  o.start_files.write = {dir};
  o.serve_files = o.start_files;
  const bool landlock = sandbox::landlock_abi() > 0;
  CHECK(exited_ok(in_child(o, [&] {
    std::ifstream status("/proc/self/status");  // capget is not on the allow-list
    std::string line;
    while (std::getline(status, line))
      if (line.rfind("CapEff:", 0) == 0 && line.find_first_not_of("0\t ", 7) != std::string::npos) return 1;
    const int in = ::open(inside.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);  // the cache, say
    if (in < 0) return 2;
    ::close(in);
    if (!landlock) return 0;
    if (::open("/etc/passwd", O_RDONLY | O_CLOEXEC) >= 0 || errno != EACCES) return 3;
    if (::open(outside.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600) >= 0 || errno != EACCES) return 4;
    if (::open("/proc/self/status", O_RDWR | O_CLOEXEC) >= 0) return 5;  // /proc: read only
    return 0;
  })));
  CHECK(::access(outside.c_str(), F_OK) != 0);
  ::unlink(inside.c_str());
  ::rmdir(dir.c_str());
}

TEST_CASE("system calls are named by their number", "[sandbox]") {
#if defined(__x86_64__)
  CHECK(sandbox::syscall_name(59) == "execve");
#endif
  CHECK(sandbox::syscall_name(100000) == "system call 100000");
}
