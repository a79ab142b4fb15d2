// The on-disk JIT cache: objects compiled from bitcode, keyed by everything that affects
// them. Writes are atomic; a damaged entry is detected, removed and rebuilt.
#pragma once

#include <optional>
#include <string>

#include "xcargo/error.h"
#include "xcargo/types.h"

namespace xcargo::loader {

class DiskCache {
public:
  // An empty dir disables the cache. The directory is created if missing.
  static Result<DiskCache> open(const std::string& dir);

  bool enabled() const { return !dir_.empty(); }
  // nullopt on a miss. A damaged entry is deleted and reported as a miss with *corrupt set.
  std::optional<Bytes> get(const std::string& key, bool* corrupt = nullptr) const;
  Status put(const std::string& key, ByteView object) const;

private:
  std::string path_of(const std::string& key) const;
  std::string dir_;
};

}  // namespace xcargo::loader
