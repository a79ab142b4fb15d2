// Whole-file reads with a size bound, and the one function every output goes through.
#pragma once

#include <chrono>
#include <string>

#include "xcargo/error.h"
#include "xcargo/types.h"

namespace xcargo {

// Refuses (Errc::limit) a file larger than max_size before reading it.
// "-" reads standard input.
Result<Bytes> read_file(const std::string& path, uint64_t max_size);

// A file's bytes, to be read once and sent on: a regular file is mapped (its pages come from
// the page cache as they are used; nothing is copied up front), anything else ("-", a pipe,
// a device) is read whole. Refuses (Errc::limit) more than max_size bytes.
class FileBytes {
public:
  [[nodiscard]] static Result<FileBytes> open(const std::string& path, uint64_t max_size);
  FileBytes(FileBytes&& other) noexcept;
  FileBytes& operator=(FileBytes&& other) noexcept;
  FileBytes(const FileBytes&) = delete;
  FileBytes& operator=(const FileBytes&) = delete;
  ~FileBytes();
  ByteView bytes() const { return map_ ? ByteView(static_cast<const uint8_t*>(map_), size_) : ByteView(owned_); }
  uint64_t size() const { return map_ ? size_ : owned_.size(); }

private:
  FileBytes() = default;
  void* map_ = nullptr;
  size_t size_ = 0;
  Bytes owned_;
};

// Writes DATA to PATH the way a user of a command-line tool expects:
// - "-", /dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N: written to that open
//   descriptor of this process, at its current position (so `> f` and `>> f` behave).
// - an existing file that is not a regular file (character or block device such as
//   /dev/null, FIFO): opened and written in place, never replaced.
// - a new path or an existing regular file: written to PATH.tmp-XXXXXX in the same
//   directory, fsynced, then renamed over PATH, so PATH holds the old or the new content,
//   never a partial one. The file gets MODE, narrowed to the permissions of the file it
//   replaces (a 0600 file stays 0600).
// - a symbolic link: followed; its target is written by the rules above and the link stays
//   a link. A link to a missing file is refused (Errc::io), as are directories and sockets.
// - but not a link or FIFO another user may have planted (not_planted).
// Errors name what failed ("cannot write: No space left on device"), not the path.
Status write_file(const std::string& path, ByteView data, unsigned mode = 0644);

// Refuses (Errc::io) a symbolic link or FIFO at PATH in a sticky directory any user can
// write to (/tmp), owned neither by this process's user nor by the directory's owner: another
// user may have made it to turn a write into a write to their choice of file, or to hang the
// writer (the kernel's protected_symlinks and protected_fifos rule, which a host may not set).
[[nodiscard]] Status not_planted(const std::string& path);

// Writes all of data to descriptor fd, through short writes and signals.
Status write_all(int fd, ByteView data);

// Reads exactly n bytes from descriptor fd, waiting at most until deadline; says what ended
// the read otherwise (end of input, the deadline, an error).
enum class ReadEnd { done, closed, timed_out, failed };
ReadEnd read_exact(int fd, uint8_t* p, size_t n,
                   std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max());

}  // namespace xcargo
