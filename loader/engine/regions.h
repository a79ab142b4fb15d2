// Node memory: named regions a loader hosts for its kernels (xc_region, xc_region_create),
// kept between invocations and across worker restarts. They live in one shared memory object
// (a sealed memfd) that the supervisor creates and every worker maps: a table of regions at
// its start, then their bytes. A worker started after another failed adopts the table and
// finds each region as the last one left it. The server registers regions with UCX so that
// clients can read them one-sidedly (ucp_get); the registration lives here, made and used by
// the server only, one per worker.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "xcargo/error.h"
#include "xcargo/types.h"

namespace xcargo::loader {

inline constexpr size_t kMaxRegions = 256;

struct Region {
  std::string name;
  uint8_t* base = nullptr;  // page-aligned, zeroed at creation
  uint64_t length = 0;
  uint64_t offset = 0;       // in the memory object
  void* ucx_memh = nullptr;  // ucp_mem_h once registered
  Bytes rkey;                // packed remote key once registered
};

class Regions {
public:
  // The shared memory object for max_total_bytes of regions: zero-filled, sparse (it takes
  // memory only where regions are written), its size sealed. The caller owns the descriptor.
  [[nodiscard]] static Result<int> create_memory(uint64_t max_total_bytes);
  // The regions in memory_fd (from create_memory with the same limit; this object maps it but
  // does not own it), or, with -1, in a memory object of its own. Regions an earlier process
  // left in the table are adopted as they are; entries that do not describe a region that
  // fits (a table a kernel wrote over) are dropped and counted in dropped().
  // `configured` (the admin's --region NAME=SIZE) come first: an entry of that name with
  // another size is dropped, and other entries are adopted only while room (bytes and
  // places) remains for the configured regions not yet there, so that creating them after
  // open always succeeds.
  [[nodiscard]] static Result<std::unique_ptr<Regions>> open(uint64_t max_total_bytes, int memory_fd = -1,
                                                             const std::vector<std::pair<std::string, uint64_t>>& configured = {});
  ~Regions();
  Regions(const Regions&) = delete;
  Regions& operator=(const Regions&) = delete;

  // Creates a zeroed region, or returns the one of that name if it has this length. Names:
  // 1 to 64 of [A-Za-z0-9_.-]. Regions live as long as the memory object; addresses never
  // move while this object lives.
  Result<Region*> create(std::string_view name, uint64_t length);
  Region* find(std::string_view name);
  std::vector<std::pair<std::string, uint64_t>> list() const;
  size_t adopted() const { return adopted_; }  // regions found in the table at open
  size_t dropped() const { return dropped_; }  // table entries refused at open

private:
  Regions() = default;
  Result<Region*> map(std::string name, uint64_t offset, uint64_t length);

  mutable std::mutex mu_;
  std::map<std::string, std::unique_ptr<Region>, std::less<>> regions_;
  uint64_t total_ = 0, max_total_ = 0;
  int fd_ = -1;
  bool own_fd_ = false;
  uint64_t size_ = 0;            // of the memory object
  struct Table* table_ = nullptr;  // mapped from its start
  size_t adopted_ = 0, dropped_ = 0;
};

}  // namespace xcargo::loader
