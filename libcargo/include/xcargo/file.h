// Whole-file reads with a size bound, and atomic writes (temp file + rename).
#pragma once

#include <string>

#include "xcargo/error.h"
#include "xcargo/types.h"

namespace xcargo {

// Refuses (Errc::limit) a file larger than max_size before reading it.
Result<Bytes> read_file(const std::string& path, uint64_t max_size);

// Writes to PATH.tmp-XXXXXX in the same directory, fsyncs, then renames over PATH, so
// PATH is either the old or the new content, never a partial one. mode applies to the file.
Status write_file_atomic(const std::string& path, ByteView data, unsigned mode = 0644);

}  // namespace xcargo
