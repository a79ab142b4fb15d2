// Fuzz target: cluster files.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "xcargo/cluster.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto c = xcargo::parse_cluster(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
  if (c.ok())
    for (uint32_t i = 0; i < c->size(); ++i)
      if (!c->find(i) || c->find(i)->id != i) std::abort();  // ids are 0..N-1, in order
  return 0;
}
