// The on-disk JIT cache: objects compiled from bitcode, keyed by everything that affects
// them, each recording the trusted keys that signed its cargo. Writes are atomic; a damaged
// entry is detected, removed and rebuilt. Only the compile service writes it (SECURITY.md).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "xcargo/error.h"
#include "xcargo/trust.h"
#include "xcargo/types.h"

namespace xcargo::loader {

class DiskCache {
public:
  // An empty dir disables the cache. The directory is created if missing.
  static Result<DiskCache> open(const std::string& dir);
  // The same cache for a process that only reads it (the worker: only the compile service
  // writes, loader/SECURITY.md item 9): nothing is created, cleaned or removed; a damaged
  // entry is reported (get's *corrupt) and left for the service. Never fails: a cache that
  // cannot be read has no hits.
  static DiskCache open_read_only(const std::string& dir);

  bool enabled() const { return !dir_.empty(); }
  // nullopt on a miss. A damaged entry is deleted and reported as a miss with *corrupt set.
  std::optional<Bytes> get(const std::string& key, bool* corrupt = nullptr) const;
  // Whether an entry is stored under key (whole or damaged: get says which).
  bool has(const std::string& key) const;
  // Stores object under key, compiled from a cargo that `signers` (trusted when it was
  // verified) signed.
  Status put(const std::string& key, ByteView object, const std::vector<KeyId>& signers) const;
  // Removes every entry none of whose signers `trust` still trusts (a revoked key takes what
  // was compiled from cargos it alone signed with it), and damaged ones. Returns how many.
  size_t sweep(const TrustStore& trust) const;
  // Removes the temporary files a writer that was ended (a compile job killed at its limit)
  // left; returns how many.
  size_t remove_partial(int writer_pid) const;

private:
  std::string path_of(const std::string& key) const;
  std::string dir_;
  bool read_only_ = false;
};

}  // namespace xcargo::loader
