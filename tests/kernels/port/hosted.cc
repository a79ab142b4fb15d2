// C++ that uses what kernels lack: operator new[]/delete[] and a libc call (the build lists every one).
#include <xcargo/kernel.h>

extern "C" int puts(const char *);

XC_ENTRY int hosted(xc_ctx *ctx, const void *in, size_t in_len) {
  int *v = new int[in_len + 1];
  v[0] = puts("hi");
  int r = v[0];
  delete[] v;
  return r;
}
