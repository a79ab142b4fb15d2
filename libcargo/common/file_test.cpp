// Tests of read_file on pipes, and of write_file: regular files replaced atomically, devices, FIFOs and descriptors
// written in place, symbolic links followed and never replaced (issue 11).
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <string>
#include <thread>

#include "support.h"
#include "xcargo/file.h"

using namespace xcargo;

namespace {

std::string slurp(const std::string& path) {
  auto b = read_file(path, 1 << 26);
  REQUIRE(b.ok());
  return std::string(b->begin(), b->end());
}

// Reads a FIFO until its writer closes it.
std::string drain(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "(cannot open)";
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) out.append(buf, size_t(n));
  ::close(fd);
  return out;
}

struct stat lstat_of(const std::string& path) {
  struct stat st {};
  REQUIRE(::lstat(path.c_str(), &st) == 0);
  return st;
}

}  // namespace

TEST_CASE("a new path and a regular file are written whole, with the requested mode", "[file]") {
  test::ScratchDir dir;
  const std::string f = dir / "out.bin";
  REQUIRE(write_file(f, as_bytes("first"), 0640).ok());
  CHECK(slurp(f) == "first");
  CHECK((lstat_of(f).st_mode & 07777) == 0640);
  REQUIRE(::chmod(f.c_str(), 0600) == 0);
  REQUIRE(write_file(f, as_bytes("second"), 0644).ok());
  CHECK(slurp(f) == "second");
  CHECK((lstat_of(f).st_mode & 07777) == 0600);  // never wider than the file it replaced
}

TEST_CASE("a reader never sees half of a replaced regular file", "[file]") {
  test::ScratchDir dir;
  const std::string f = dir / "big.bin";
  const size_t size = 4 << 20;
  const std::string a(size, 'a'), b(size, 'b');
  REQUIRE(write_file(f, as_bytes(a)).ok());
  std::atomic<bool> done{false};
  std::atomic<int> torn{0}, reads{0};
  std::thread reader([&] {
    while (!done) {
      auto got = read_file(f, size * 2);
      if (!got.ok()) continue;
      ++reads;
      const std::string s(got->begin(), got->end());
      if (s != a && s != b) ++torn;
    }
  });
  for (int i = 0; i < 40; ++i) REQUIRE(write_file(f, as_bytes(i % 2 ? a : b)).ok());
  done = true;
  reader.join();
  CHECK(reads > 0);
  CHECK(torn == 0);
}

TEST_CASE("a FIFO receives the bytes and stays a FIFO", "[file]") {
  test::ScratchDir dir;
  const std::string p = dir / "pipe";
  REQUIRE(::mkfifo(p.c_str(), 0600) == 0);
  std::string got;
  std::thread reader([&] { got = drain(p); });
  const std::string text(100000, 'x');
  Status s = write_file(p, as_bytes(text));
  reader.join();
  REQUIRE(s.ok());
  CHECK(S_ISFIFO(lstat_of(p).st_mode));
  CHECK(got == text);
}

TEST_CASE("a pipe is read to its end, within the limit", "[file]") {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const std::string text(200000, 'y');
  std::thread writer([&] {
    size_t done = 0;
    while (done < text.size()) {
      ssize_t n = ::write(fds[1], text.data() + done, text.size() - done);
      if (n <= 0) break;
      done += size_t(n);
    }
    ::close(fds[1]);
  });
  auto got = read_file("/proc/self/fd/" + std::to_string(fds[0]), 1 << 20);
  writer.join();
  ::close(fds[0]);
  REQUIRE(got.ok());
  CHECK(got->size() == text.size());  // not 0, what fstat says of a pipe

  REQUIRE(::pipe(fds) == 0);
  // PIPE_BUF bytes: one atomic write that fits the pipe, so it never races the reader's close
  // (a larger write could still be blocked then, and die of SIGPIPE).
  std::thread big([&] {
    (void)!::write(fds[1], text.data(), PIPE_BUF);
    ::close(fds[1]);
  });
  auto over = read_file("/proc/self/fd/" + std::to_string(fds[0]), 1000);
  ::close(fds[0]);
  big.join();
  REQUIRE_FALSE(over.ok());
  CHECK(over.error().code() == Errc::limit);
}

TEST_CASE("a character device is written in place, never replaced", "[file]") {
  test::ScratchDir dir;
  const std::string null = dir / "null";
  // A private copy of /dev/null (major 1, minor 3): even a broken write_file cannot damage
  // the system's. Making device nodes needs root.
  if (::mknod(null.c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0) {
    WARN("cannot make a device node here (not root): skipped");
    return;
  }
  REQUIRE(::chmod(null.c_str(), 0666) == 0);
  REQUIRE(write_file(null, as_bytes("gone")).ok());
  const struct stat st = lstat_of(null);
  CHECK(S_ISCHR(st.st_mode));
  CHECK((st.st_mode & 07777) == 0666);
  CHECK(st.st_rdev == makedev(1, 3));
}

TEST_CASE("descriptor names write to this process's descriptor at its position", "[file]") {
  test::ScratchDir dir;
  const std::string f = dir / "log.txt";
  int fd = ::open(f.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  REQUIRE(fd >= 0);
  REQUIRE(::write(fd, "head;", 5) == 5);
  REQUIRE(write_file("/dev/fd/" + std::to_string(fd), as_bytes("one;")).ok());
  REQUIRE(write_file("/proc/self/fd/" + std::to_string(fd), as_bytes("two")).ok());
  ::close(fd);
  CHECK(slurp(f) == "head;one;two");  // appended, as `>>` would: not replaced
}

TEST_CASE("a symbolic link is followed: its target is written, the link stays", "[file]") {
  test::ScratchDir dir;
  const std::string target = dir / "target.bin", link = dir / "link.bin";
  REQUIRE(write_file(target, as_bytes("old")).ok());
  REQUIRE(::symlink("target.bin", link.c_str()) == 0);
  REQUIRE(write_file(link, as_bytes("new")).ok());
  CHECK(S_ISLNK(lstat_of(link).st_mode));
  CHECK(slurp(target) == "new");

  const std::string dangling = dir / "dangling";
  REQUIRE(::symlink("missing/nowhere", dangling.c_str()) == 0);
  auto s = write_file(dangling, as_bytes("x"));
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().message().find("symbolic link") != std::string::npos);
  CHECK(S_ISLNK(lstat_of(dangling).st_mode));
}

TEST_CASE("directories and empty names are refused", "[file]") {
  test::ScratchDir dir;
  auto d = write_file(dir.path(), as_bytes("x"));
  REQUIRE_FALSE(d.ok());
  CHECK(d.error().message().find("directory") != std::string::npos);
  CHECK_FALSE(write_file("", as_bytes("x")).ok());
}

TEST_CASE("a link or FIFO another user made in a shared directory is not followed", "[file]") {
  if (::geteuid() != 0) return;  // making another user's link needs root
  test::ScratchDir dir;
  const std::string shared = dir / "tmp";
  REQUIRE(::mkdir(shared.c_str(), 01777) == 0);
  REQUIRE(::chmod(shared.c_str(), 01777) == 0);
  const std::string precious = dir / "precious", link = shared + "/ready", fifo = shared + "/fifo";
  REQUIRE(write_file(precious, as_bytes("keep")).ok());
  auto text = [&] {
    auto b = read_file(precious, 100);
    return b.ok() ? std::string(b->begin(), b->end()) : std::string();
  };
  REQUIRE(::symlink(precious.c_str(), link.c_str()) == 0);
  REQUIRE(::lchown(link.c_str(), 65534, 65534) == 0);
  auto s = write_file(link, as_bytes("127.0.0.1:7400"));
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().message().find("is a symbolic link of uid 65534 in " + shared) != std::string::npos);
  CHECK(text() == "keep");
  REQUIRE(::mkfifo(fifo.c_str(), 0666) == 0);
  REQUIRE(::chown(fifo.c_str(), 65534, 65534) == 0);
  CHECK_FALSE(not_planted(fifo).ok());  // refused before an open that would wait for a reader
  // This user's own link there is followed, as anywhere.
  REQUIRE(::lchown(link.c_str(), 0, 0) == 0);
  CHECK(write_file(link, as_bytes("new")).ok());
  CHECK(text() == "new");
}
