// Bounded whole-file reads, and writes that replace regular files atomically and write
// devices, pipes and descriptors in place.
#include "xcargo/file.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <utility>

namespace xcargo {

static Error sys_error(const std::string& what) { return Error(Errc::io, what + ": " + std::strerror(errno)); }

Result<Bytes> read_file(const std::string& path, uint64_t max_size) {
  int fd = path == "-" ? ::fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 0) : ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return sys_error(path == "-" ? "cannot read standard input" : "cannot open");
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    Error e = sys_error("cannot stat");
    ::close(fd);
    return e;
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    return Error(Errc::io, "is a directory, not a file");
  }
  if (!S_ISREG(st.st_mode)) {  // a pipe, FIFO, socket or device: read to its end, bounded
    Bytes data;
    uint8_t chunk[65536];
    for (;;) {
      ssize_t n = ::read(fd, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        Error e = sys_error("cannot read");
        ::close(fd);
        return e;
      }
      if (n == 0) break;
      if (data.size() + size_t(n) > max_size) {
        ::close(fd);
        return Error(Errc::limit, "more than " + std::to_string(max_size) + " bytes, the limit");
      }
      data.insert(data.end(), chunk, chunk + n);
    }
    ::close(fd);
    return data;
  }
  if (uint64_t(st.st_size) > max_size) {
    ::close(fd);
    return Error(Errc::limit, "file is " + std::to_string(st.st_size) + " bytes, over the limit of " +
                                  std::to_string(max_size));
  }
  Bytes data(size_t(st.st_size));
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::read(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      Error e = sys_error("cannot read");
      ::close(fd);
      return e;
    }
    if (n == 0) break;  // the file shrank while we read it
    done += size_t(n);
  }
  ::close(fd);
  data.resize(done);
  return data;
}

Result<FileBytes> FileBytes::open(const std::string& path, uint64_t max_size) {
  FileBytes f;
  struct stat st {};
  if (path != "-" && ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
    if (uint64_t(st.st_size) > max_size)
      return Error(Errc::limit, "file is " + std::to_string(st.st_size) + " bytes, over the limit of " + std::to_string(max_size));
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return sys_error("cannot open");
    void* p = ::mmap(nullptr, size_t(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
    Error e = sys_error("cannot map");
    ::close(fd);
    if (p == MAP_FAILED) return e;
    ::madvise(p, size_t(st.st_size), MADV_SEQUENTIAL);
    f.map_ = p;
    f.size_ = size_t(st.st_size);
    return f;
  }
  auto bytes = read_file(path, max_size);
  XC_TRY(bytes);
  f.owned_ = std::move(*bytes);
  return f;
}

FileBytes::FileBytes(FileBytes&& other) noexcept { *this = std::move(other); }

FileBytes& FileBytes::operator=(FileBytes&& other) noexcept {
  if (this != &other) {
    if (map_) ::munmap(map_, size_);
    map_ = std::exchange(other.map_, nullptr);
    size_ = std::exchange(other.size_, 0);
    owned_ = std::move(other.owned_);
  }
  return *this;
}

FileBytes::~FileBytes() {
  if (map_) ::munmap(map_, size_);
}

Status write_all(int fd, ByteView data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return sys_error("cannot write");
    done += size_t(n);
  }
  return {};
}

ReadEnd read_exact(int fd, uint8_t* p, size_t n, std::chrono::steady_clock::time_point deadline) {
  using Clock = std::chrono::steady_clock;
  size_t done = 0;
  while (done < n) {
    int wait = -1;
    if (deadline != Clock::time_point::max()) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) return ReadEnd::timed_out;
      wait = int(std::min<int64_t>(left, 1 << 30));
    }
    pollfd pfd{fd, POLLIN, 0};
    const int rc = ::poll(&pfd, 1, wait);
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0) return ReadEnd::failed;
    if (rc == 0) continue;  // the deadline, checked above
    const ssize_t got = ::read(fd, p + done, n - done);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return ReadEnd::failed;
    if (got == 0) return ReadEnd::closed;
    done += size_t(got);
  }
  return ReadEnd::done;
}

namespace {

// The descriptor a path names by itself ("-", /dev/stdout, /proc/self/fd/N), if any.
std::optional<int> named_descriptor(const std::string& path) {
  if (path == "-" || path == "/dev/stdout") return 1;
  if (path == "/dev/stderr") return 2;
  for (const char* prefix : {"/dev/fd/", "/proc/self/fd/"}) {
    const size_t n = std::strlen(prefix);
    if (path.size() > n && path.compare(0, n, prefix) == 0 && path.size() - n <= 9 &&
        path.find_first_not_of("0123456789", n) == std::string::npos)
      return std::atoi(path.c_str() + n);
  }
  return std::nullopt;
}

Status write_in_place(const std::string& path, ByteView data) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return sys_error(errno == ENXIO ? "cannot open (a socket, or a pipe nobody reads)" : "cannot open");
  Status s = write_all(fd, data);
  if (::close(fd) != 0 && s.ok()) return sys_error("cannot close");
  return s;
}

Status replace_atomically(const std::string& path, ByteView data, unsigned mode) {
  // The writer's pid in the name: whoever ended a writer can remove what it left (DiskCache).
  std::string tmp = path + ".tmp-" + std::to_string(::getpid()) + "-XXXXXX";
  int fd = ::mkstemp(tmp.data());
  if (fd < 0) return sys_error("cannot create a temporary file beside it");
  auto fail = [&](Error e) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return e;
  };
  if (::fchmod(fd, mode) != 0) return fail(sys_error("cannot set file mode"));
  if (Status s = write_all(fd, data); !s.ok()) return fail(s.error());
  if (::fsync(fd) != 0) return fail(sys_error("cannot sync"));
  if (::close(fd) != 0) {
    Error e = sys_error("cannot close");
    ::unlink(tmp.c_str());
    return e;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    Error e = sys_error("cannot rename into place");
    ::unlink(tmp.c_str());
    return e;
  }
  return {};
}

}  // namespace

Status not_planted(const std::string& path) {
  struct stat st {}, dir {};
  if (::lstat(path.c_str(), &st) != 0 || !(S_ISLNK(st.st_mode) || S_ISFIFO(st.st_mode))) return {};
  const size_t slash = path.rfind('/');
  const std::string parent = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  if (::stat(parent.c_str(), &dir) != 0) return sys_error("cannot stat its directory");
  const bool shared = (dir.st_mode & S_ISVTX) && (dir.st_mode & S_IWOTH);
  if (!shared || st.st_uid == ::geteuid() || st.st_uid == dir.st_uid) return {};
  return Error(Errc::io, std::string("is a ") + (S_ISLNK(st.st_mode) ? "symbolic link" : "named pipe") + " of uid " +
                             std::to_string(st.st_uid) + " in " + parent +
                             ", where any user can make one: not followed (it may point the write at another file)")
      .hint("write to a directory only this user can write to, or remove it and let the file be made");
}

Status write_file(const std::string& path, ByteView data, unsigned mode) {
  if (path.empty()) return Error(Errc::io, "no file name given");
  if (auto fd = named_descriptor(path)) return write_all(*fd, data);
  XC_TRY(not_planted(path));
  std::string target = path;
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
    char resolved[PATH_MAX];
    if (!::realpath(path.c_str(), resolved))
      return Error(Errc::io, std::string("is a symbolic link that cannot be followed: ") + std::strerror(errno))
          .hint("a link to a missing file is not replaced by a file: write to the target's path, or remove the link");
    target = resolved;
    if (auto fd = named_descriptor(target)) return write_all(*fd, data);
  }
  if (::stat(target.c_str(), &st) != 0) {
    if (errno != ENOENT) return sys_error("cannot stat");
    return replace_atomically(target, data, mode);
  }
  if (S_ISREG(st.st_mode)) return replace_atomically(target, data, mode & st.st_mode & 07777);
  if (S_ISDIR(st.st_mode)) return Error(Errc::io, "is a directory, not a file");
  if (S_ISSOCK(st.st_mode)) return Error(Errc::io, "is a socket; cannot write a file to it");
  return write_in_place(target, data);  // a device or a FIFO
}

}  // namespace xcargo
