// Node memory: named regions a loader hosts for its kernels (xc_region, xc_region_create),
// kept between invocations. The server registers them with UCX so that clients can read them
// one-sidedly (ucp_get); the registration lives here, made and used by the server only.
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
  void* ucx_memh = nullptr;  // ucp_mem_h once registered
  Bytes rkey;                // packed remote key once registered
};

class Regions {
public:
  explicit Regions(uint64_t max_total_bytes) : max_total_(max_total_bytes) {}
  ~Regions();
  Regions(const Regions&) = delete;
  Regions& operator=(const Regions&) = delete;

  // Creates a zeroed region, or returns the one of that name if it has this length. Names:
  // 1 to 64 of [A-Za-z0-9_.-]. Regions live as long as this object; addresses never move.
  Result<Region*> create(std::string_view name, uint64_t length);
  Region* find(std::string_view name);
  std::vector<std::pair<std::string, uint64_t>> list() const;

private:
  mutable std::mutex mu_;
  std::map<std::string, std::unique_ptr<Region>, std::less<>> regions_;
  uint64_t total_ = 0, max_total_;
};

}  // namespace xcargo::loader
