// Bounded whole-file reads and atomic file writes.
#include "xcargo/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace xcargo {

static Error sys_error(const std::string& what) { return Error(Errc::io, what + ": " + std::strerror(errno)); }

Result<Bytes> read_file(const std::string& path, uint64_t max_size) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return sys_error("cannot open");
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

Status write_file_atomic(const std::string& path, ByteView data, unsigned mode) {
  std::string tmp = path + ".tmp-XXXXXX";
  int fd = ::mkstemp(tmp.data());
  if (fd < 0) return sys_error("cannot create a temporary file beside it");
  auto fail = [&](const char* what) {
    Error e = sys_error(what);
    ::close(fd);
    ::unlink(tmp.c_str());
    return e;
  };
  if (::fchmod(fd, mode) != 0) return fail("cannot set file mode");
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail("cannot write");
    done += size_t(n);
  }
  if (::fsync(fd) != 0) return fail("cannot sync");
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

}  // namespace xcargo
