// C as real programs write it, whose reply must be the same from every variant (native
// objects, and bitcode JIT-compiled on any CPU): structs and unions passed and returned by
// value between the kernel's own functions, bit-fields, a switch dense enough for a jump
// table, function pointers, recursion, memcpy of packed data, 64-bit integer arithmetic
// (signed overflow avoided, shifts, division of negatives) and floating point with nothing a
// compiler may fuse (printed to 9 significant digits), and what C leaves to each ABI but xcargo
// makes the same everywhere: `char` and `wchar_t` signed, `long double` a double, `__int128`
// arithmetic that needs no helper, a vector type inside a struct. Used by engine_test and
// mixed_test.
#include <stdio.h>
#include <string.h>
#include <xcargo/kernel.h>

struct point {
  int32_t x, y;
  double w;
};

union bits {
  double d;
  uint64_t u;
  uint8_t b[8];
};

struct flags {
  unsigned ready : 1;
  unsigned mode : 3;
  signed level : 5;
  unsigned count : 12;
};

#pragma pack(push, 1)
struct packed {
  uint8_t tag;
  uint32_t value;
  uint16_t more;
};
#pragma pack(pop)

typedef float vec4 __attribute__((vector_size(16)));
struct with_vec {
  char tag;
  vec4 v;  // at offset 16 on every variant: le64's own data layout aligns vectors to 4
};

static struct with_vec scale_vec(struct with_vec a, float k) {
  a.v = a.v * k + (vec4){1, 2, 3, 4};
  a.tag += 1;
  return a;
}

static struct point add_points(struct point a, struct point b) {
  struct point r = {a.x + b.x, a.y + b.y, a.w * 0.5 + b.w * 0.25};
  return r;
}

static union bits flip(union bits v) {
  v.u ^= 0x8000000000000000ull;
  return v;
}

static int op_add(int a, int b) { return a + b; }
static int op_sub(int a, int b) { return a - b; }
static int op_mul(int a, int b) { return a * b; }
static int op_xor(int a, int b) { return a ^ b; }

static int ackermann_small(int m, int n) {
  if (m == 0) return n + 1;
  if (n == 0) return ackermann_small(m - 1, 1);
  return ackermann_small(m - 1, ackermann_small(m, n - 1));
}

static uint64_t fib(unsigned n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

static const char *name_of(int k) {
  switch (k) {
    case 0: return "zero";
    case 1: return "one";
    case 2: return "two";
    case 3: return "three";
    case 4: return "four";
    case 5: return "five";
    case 6: return "six";
    case 7: return "seven";
    case 9: return "nine";
    default: return "many";
  }
}

XC_ENTRY int run(xc_ctx *ctx, const void *in, size_t in_len) {
  (void)in;
  char out[512];
  int n = 0;

  struct point p = add_points((struct point){3, -4, 1.5}, (struct point){-10, 20, 8.0});
  n += snprintf(out + n, sizeof out - n, "point %d %d %.9g\n", p.x, p.y, p.w);

  union bits u = {.d = -2.75};
  u = flip(u);
  n += snprintf(out + n, sizeof out - n, "union %.9g %016llx %u\n", u.d, (unsigned long long)u.u, u.b[7]);

  struct flags f = {0};
  f.ready = 1;
  f.mode = 5;
  f.level = -7;
  f.count = 4000 + (unsigned)in_len;
  uint32_t raw = 0;
  memcpy(&raw, &f, sizeof raw < sizeof f ? sizeof raw : sizeof f);
  n += snprintf(out + n, sizeof out - n, "flags %u %u %d %u %08x\n", f.ready, f.mode, f.level, f.count, raw);

  const uint8_t wire[14] = {7, 0x78, 0x56, 0x34, 0x12, 0xcd, 0xab, 9, 0xef, 0xbe, 0xad, 0xde, 1, 2};
  struct packed pk[2];
  memcpy(pk, wire, sizeof pk);
  n += snprintf(out + n, sizeof out - n, "packed %u %08x %04x %u %08x %zu\n", pk[0].tag, pk[0].value, pk[0].more, pk[1].tag,
                pk[1].value, sizeof(struct packed));

  int (*const ops[])(int, int) = {op_add, op_sub, op_mul, op_xor};
  int acc = 17;
  for (int i = 0; i < 12; ++i) acc = ops[(i * 7 + (int)in_len) % 4](acc, i + 3);
  n += snprintf(out + n, sizeof out - n, "ops %d\n", acc);

  n += snprintf(out + n, sizeof out - n, "recursion %d %llu\n", ackermann_small(2, 3), (unsigned long long)fib(24));

  for (int k = 0; k < 11; ++k) n += snprintf(out + n, sizeof out - n, "%s%c", name_of(k), k == 10 ? '\n' : ' ');

  int64_t big = -9007199254740993ll;
  uint64_t ub = 0xfedcba9876543210ull;
  n += snprintf(out + n, sizeof out - n, "int64 %lld %lld %lld %llu %llu %d\n", (long long)(big / 7), (long long)(big % 7),
                (long long)(big >> 3), (unsigned long long)(ub >> 17), (unsigned long long)(ub * 0x9e3779b97f4a7c15ull),
                (int)(-7 / 2));

  double x = 0.1, acc_d = 0;
  for (int i = 1; i <= 50; ++i) acc_d += x * i / (i + 1.0);
  float fl = 1.0f / 3.0f;
  n += snprintf(out + n, sizeof out - n, "fp %.9g %.9g\n", acc_d, (double)fl);

  long double third = 1.0L / (3 + (long double)in_len);
  char c = (char)0xc8;
  wchar_t w = (wchar_t)-1;
  n += snprintf(out + n, sizeof out - n, "abi %zu %.17g %d %d %zu\n", sizeof(long double), (double)third, c, w < 0,
                sizeof(wchar_t));

  unsigned __int128 wide = (unsigned __int128)ub * 0x9e3779b97f4a7c15ull;
  __int128 sw = (__int128)big << 40;
  sw = (sw >> 3) + wide;
  n += snprintf(out + n, sizeof out - n, "int128 %016llx%016llx %016llx %016llx\n", (unsigned long long)(wide >> 64),
                (unsigned long long)wide, (unsigned long long)((unsigned __int128)sw >> 64), (unsigned long long)sw);

  struct with_vec wv = scale_vec((struct with_vec){'a', {0.5f, -1.25f, 8, 1e-3f}}, 2 + (float)in_len);
  n += snprintf(out + n, sizeof out - n, "vector %c %zu %zu %.9g %.9g %.9g %.9g\n", wv.tag, sizeof wv,
                __builtin_offsetof(struct with_vec, v), (double)wv.v[0], (double)wv.v[1], (double)wv.v[2], (double)wv.v[3]);

  return xc_reply(ctx, out, (size_t)n);
}
