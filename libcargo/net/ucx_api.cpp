// dlopen()s UCX's libucp and libucs once and resolves every function of XC_UCX_FUNCTIONS.
#include "net/ucx.h"

#include <dlfcn.h>

#include <cstdlib>

#include <mutex>
#include <string>

namespace xcargo::net {

std::atomic<const UcxApi*> ucx_loaded{nullptr};

const UcxApi* ucx_api(const char** why) {
  static UcxApi api;
  static const UcxApi* loaded = nullptr;
  static std::string error;
  static std::once_flag once;
  std::call_once(once, [] {
    void* ucs = ::dlopen("libucs.so.0", RTLD_NOW | RTLD_GLOBAL);
    void* ucp = ::dlopen("libucp.so.0", RTLD_NOW | RTLD_GLOBAL);
    if (!ucs || !ucp) {
      error = std::string("cannot load UCX (libucp.so.0, libucs.so.0): ") + ::dlerror();
      return;
    }
#define XC_UCX_RESOLVE(name)                                                              \
  api.name = reinterpret_cast<decltype(api.name)>(::dlsym(ucp, #name));                 \
  if (!api.name) api.name = reinterpret_cast<decltype(api.name)>(::dlsym(ucs, #name));  \
  if (!api.name) {                                                                      \
    error = "UCX lacks " #name;                                                         \
    return;                                                                             \
  }
    XC_UCX_FUNCTIONS(XC_UCX_RESOLVE)
#undef XC_UCX_RESOLVE
    loaded = &api;
    ucx_loaded.store(&api, std::memory_order_release);
  });
  if (why) *why = error.c_str();
  return loaded;
}

void default_ucx_log_level(const char* level) {
  if (std::getenv("UCX_LOG_LEVEL")) return;
  if (const UcxApi* api = ucx_api()) (void)api->ucs_global_opts_set_value("LOG_LEVEL", level);
}

}  // namespace xcargo::net
