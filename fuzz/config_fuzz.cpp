// Fuzz target: loader.yaml, the loader's configuration file.
#include <cstdint>
#include <string_view>

#include "config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  xcargo::loader::LoaderConfig c;
  (void)xcargo::loader::parse_config(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz", c);
  return 0;
}
