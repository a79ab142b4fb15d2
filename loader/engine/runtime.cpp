// The runtime API implementation (xc_reply, xc_alloc, ...) and the allowed-symbol table.
#include "engine/runtime.h"

#include <sys/mman.h>

#include <cmath>
#include <cstring>
#include <stdexcept>

#include "engine/regions.h"
#include "common/large_buffers.h"
#include "read/abi.h"
#include "wire/wire.h"

namespace {
thread_local xc_ctx* t_ctx = nullptr;
thread_local void* t_handle = nullptr;

// The context behind a kernel's handle; null for any other pointer.
xc_ctx* real(xc_ctx* handle) { return handle && handle == t_handle ? t_ctx : nullptr; }
}  // namespace

xc_ctx* xcargo::loader::kernel_handle(xc_ctx* ctx) {
  if (!t_handle) {
    void* page = ::mmap(nullptr, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED) return nullptr;  // the kernel's runtime calls then fail
    t_handle = page;
  }
  t_ctx = ctx;
  return static_cast<xc_ctx*>(t_handle);
}

extern "C" {

int xc_reply(xc_ctx* ctx, const void* data, size_t len) {
  if (!(ctx = real(ctx))) return -1;
  if (ctx->forwarded) return -1;
  if (ctx->reply_is_input) {  // a second piece: the first is copied after all
    ctx->reply_is_input = false;
    xcargo::append_large(ctx->reply, ctx->input, ctx->input_replied);
  }
  if (len > ctx->max_reply - ctx->reply.size() || (len && !data)) {
    ctx->reply_overflow = true;
    return -1;
  }
  if (ctx->reply.empty() && len >= xcargo::loader::kReplyFromInput && data == ctx->input && len <= ctx->input_len) {
    ctx->reply_is_input = true;  // the caller sends the input's own buffer (InvokeResult::reply_from_input)
    ctx->input_replied = len;
    return 0;
  }
  xcargo::append_large(ctx->reply, data, len);
  return 0;
}

void* xc_alloc(xc_ctx* ctx, size_t len) {
  if (!(ctx = real(ctx))) return nullptr;
  if (len == 0) len = 1;
  if (len > ctx->alloc_budget) return nullptr;
  // A cache line: vector loads of a block never straddle two (16-byte alignment cost a
  // vectorized stencil about 10%, tests/bench/kernels).
  std::unique_ptr<uint8_t[], xc_ctx::AlignedDelete> block(
      static_cast<uint8_t*>(::operator new[](len, std::align_val_t(64), std::nothrow)));
  if (!block) return nullptr;
  ctx->alloc_budget -= len;
  ctx->allocations.push_back(std::move(block));
  return ctx->allocations.back().get();
}

void xc_log(xc_ctx* ctx, const char* msg) {
  if (!(ctx = real(ctx)) || !msg) return;
  const std::string_view line(msg, strnlen(msg, 1024));
  if (ctx->log_fn) ctx->log_fn(ctx->log_self, ctx, line);
  if (ctx->kept_log) {
    if (ctx->kept_log->size() < xcargo::wire::kMaxLogLines) ctx->kept_log->emplace_back(line.substr(0, xcargo::wire::kMaxLogLine));
    else ++ctx->log_dropped;
  }
}

int xc_forward(xc_ctx* ctx, uint32_t node, const char* entry, const void* in, size_t len) {
  if (!(ctx = real(ctx))) return -1;
  if (ctx->forwarded || !ctx->reply.empty() || ctx->reply_is_input || ctx->max_forward_input == 0) return -1;
  if (node >= ctx->node_count || node == ctx->node_id || !entry || len > ctx->max_forward_input || (len && !in)) return -1;
  const size_t n = strnlen(entry, 65);
  if (n == 0 || n > 64) return -1;
  ctx->forwarded = true;
  ctx->forward_node = node;
  ctx->forward_entry.assign(entry, n);
  const auto* p = static_cast<const uint8_t*>(in);
  if (ctx->forward_input.capacity() == 0) ctx->forward_input = xcargo::take_spare();  // no allocation per hop
  ctx->forward_input.assign(p, p + len);
  return 0;
}

void* xc_region(xc_ctx* ctx, const char* name, size_t* len) {
  if (!(ctx = real(ctx)) || !ctx->regions || !name) return nullptr;
  xcargo::loader::Region* r = ctx->regions->find(std::string_view(name, strnlen(name, 65)));
  if (!r) return nullptr;
  if (len) *len = r->length;
  return r->base;
}

void* xc_region_create(xc_ctx* ctx, const char* name, size_t len) {
  if (!(ctx = real(ctx)) || !ctx->regions || !name) return nullptr;
  auto r = ctx->regions->create(std::string_view(name, strnlen(name, 65)), len);
  if (!r.ok()) {
    if (ctx->log_fn) ctx->log_fn(ctx->log_self, ctx, "xc_region_create: " + r.error().message());
    return nullptr;
  }
  return (*r)->base;
}

uint32_t xc_node_id(xc_ctx* ctx) { return (ctx = real(ctx)) ? ctx->node_id : 0; }
uint32_t xc_node_count(xc_ctx* ctx) { return (ctx = real(ctx)) ? ctx->node_count : 0; }

}  // extern "C"

namespace xcargo::loader {

namespace {

using D1 = double (*)(double);
using F1 = float (*)(float);
using D2 = double (*)(double, double);
using F2 = float (*)(float, float);

template <class F>
void* fn(F f) {
  return reinterpret_cast<void*>(f);
}

std::vector<RuntimeSymbol> build_table() {
  const std::vector<RuntimeSymbol> all = {
      {"xc_alloc", fn(&xc_alloc)}, {"xc_forward", fn(&xc_forward)}, {"xc_log", fn(&xc_log)}, {"xc_node_count", fn(&xc_node_count)},
      {"xc_node_id", fn(&xc_node_id)}, {"xc_region", fn(&xc_region)}, {"xc_region_create", fn(&xc_region_create)},
      {"xc_reply", fn(&xc_reply)},
      {"memcmp", fn(static_cast<int (*)(const void*, const void*, size_t)>(&::memcmp))},
      {"memcpy", fn(static_cast<void* (*)(void*, const void*, size_t)>(&::memcpy))},
      {"memmove", fn(static_cast<void* (*)(void*, const void*, size_t)>(&::memmove))},
      {"memset", fn(static_cast<void* (*)(void*, int, size_t)>(&::memset))},
      {"strlen", fn(static_cast<size_t (*)(const char*)>(&::strlen))},
      {"acos", fn(static_cast<D1>(&::acos))}, {"acosf", fn(static_cast<F1>(&::acosf))},
      {"asin", fn(static_cast<D1>(&::asin))}, {"asinf", fn(static_cast<F1>(&::asinf))},
      {"atan", fn(static_cast<D1>(&::atan))}, {"atan2", fn(static_cast<D2>(&::atan2))},
      {"atan2f", fn(static_cast<F2>(&::atan2f))}, {"atanf", fn(static_cast<F1>(&::atanf))},
      {"ceil", fn(static_cast<D1>(&::ceil))}, {"ceilf", fn(static_cast<F1>(&::ceilf))},
      {"cos", fn(static_cast<D1>(&::cos))}, {"cosf", fn(static_cast<F1>(&::cosf))},
      {"cosh", fn(static_cast<D1>(&::cosh))}, {"coshf", fn(static_cast<F1>(&::coshf))},
      {"exp", fn(static_cast<D1>(&::exp))}, {"exp2", fn(static_cast<D1>(&::exp2))},
      {"exp2f", fn(static_cast<F1>(&::exp2f))}, {"expf", fn(static_cast<F1>(&::expf))},
      {"fabs", fn(static_cast<D1>(&::fabs))}, {"fabsf", fn(static_cast<F1>(&::fabsf))},
      {"floor", fn(static_cast<D1>(&::floor))}, {"floorf", fn(static_cast<F1>(&::floorf))},
      {"fma", fn(static_cast<double (*)(double, double, double)>(&::fma))},
      {"fmaf", fn(static_cast<float (*)(float, float, float)>(&::fmaf))},
      {"fmax", fn(static_cast<D2>(&::fmax))}, {"fmaxf", fn(static_cast<F2>(&::fmaxf))},
      {"fmin", fn(static_cast<D2>(&::fmin))}, {"fminf", fn(static_cast<F2>(&::fminf))},
      {"fmod", fn(static_cast<D2>(&::fmod))}, {"fmodf", fn(static_cast<F2>(&::fmodf))},
      {"log", fn(static_cast<D1>(&::log))}, {"log10", fn(static_cast<D1>(&::log10))},
      {"log10f", fn(static_cast<F1>(&::log10f))}, {"log2", fn(static_cast<D1>(&::log2))},
      {"log2f", fn(static_cast<F1>(&::log2f))}, {"logf", fn(static_cast<F1>(&::logf))},
      {"pow", fn(static_cast<D2>(&::pow))}, {"powf", fn(static_cast<F2>(&::powf))},
      {"round", fn(static_cast<D1>(&::round))}, {"roundf", fn(static_cast<F1>(&::roundf))},
      {"sin", fn(static_cast<D1>(&::sin))}, {"sinf", fn(static_cast<F1>(&::sinf))},
      {"sinh", fn(static_cast<D1>(&::sinh))}, {"sinhf", fn(static_cast<F1>(&::sinhf))},
      {"sqrt", fn(static_cast<D1>(&::sqrt))}, {"sqrtf", fn(static_cast<F1>(&::sqrtf))},
      {"tan", fn(static_cast<D1>(&::tan))}, {"tanf", fn(static_cast<F1>(&::tanf))},
      {"tanh", fn(static_cast<D1>(&::tanh))}, {"tanhf", fn(static_cast<F1>(&::tanhf))},
      {"trunc", fn(static_cast<D1>(&::trunc))}, {"truncf", fn(static_cast<F1>(&::truncf))},
      {"hypot", fn(static_cast<D2>(&::hypot))}, {"hypotf", fn(static_cast<F2>(&::hypotf))},
      {"cbrt", fn(static_cast<D1>(&::cbrt))}, {"cbrtf", fn(static_cast<F1>(&::cbrtf))},
      {"lround", fn(static_cast<long (*)(double)>(&::lround))},
  };
  // Ordered as the allow-list; a name missing here is a build bug caught by the tests.
  std::vector<RuntimeSymbol> table;
  for (std::string_view name : abi::allowed_imports())
    for (const auto& s : all)
      if (s.name == name) table.push_back(s);
  return table;
}

}  // namespace

const std::vector<RuntimeSymbol>& runtime_symbols() {
  static const std::vector<RuntimeSymbol> table = build_table();
  return table;
}

}  // namespace xcargo::loader
