/* scale: compute kernels of adjustable length for scripts/bench-kernels, the same source
 * built as a cargo and as a native program (native_main.c). Input: a little-endian u64
 * repetition count, then a u64 seed. Each entry replies with an 8-byte checksum, so that
 * nothing it computes can be optimized away and the two builds can be compared. */
#include <xcargo/kernel.h>

#define GRID 64 /* stencil: a 64x64 grid of floats, 16 KiB, from xc_alloc */
#define LANES 64 /* hash: 64 independent 64-bit states */

static int read_args(const void *in, size_t in_len, uint64_t *reps, uint64_t *seed) {
  if (in_len != 2 * sizeof(uint64_t)) return 0;
  memcpy(reps, in, sizeof *reps);
  memcpy(seed, (const char *)in + sizeof *reps, sizeof *seed);
  return 1;
}

/* Jacobi relaxation on a 2-D grid: floating point, vectorizable. */
XC_ENTRY int stencil(xc_ctx *ctx, const void *in, size_t in_len) {
  uint64_t reps, seed;
  if (!read_args(in, in_len, &reps, &seed)) return 1;
  float *a = (float *)xc_alloc(ctx, sizeof(float) * GRID * GRID);
  float *b = (float *)xc_alloc(ctx, sizeof(float) * GRID * GRID);
  if (!a || !b) return 2;
  for (int i = 0; i < GRID * GRID; ++i) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    a[i] = b[i] = (float)(seed >> 40) * (1.0f / 16777216.0f);
  }
  for (uint64_t r = 0; r < reps; ++r) {
    for (int y = 1; y < GRID - 1; ++y)
      for (int x = 1; x < GRID - 1; ++x)
        b[y * GRID + x] = 0.2f * (a[y * GRID + x] + a[(y - 1) * GRID + x] + a[(y + 1) * GRID + x] +
                                  a[y * GRID + x - 1] + a[y * GRID + x + 1]);
    float *t = a;
    a = b;
    b = t;
  }
  double sum = 0;
  for (int i = 0; i < GRID * GRID; ++i) sum += a[i];
  return xc_reply(ctx, &sum, sizeof sum);
}

/* Integer mixing of independent lanes: multiplies, shifts and rotates, no memory traffic. */
XC_ENTRY int hash(xc_ctx *ctx, const void *in, size_t in_len) {
  uint64_t reps, seed;
  if (!read_args(in, in_len, &reps, &seed)) return 1;
  uint64_t s[LANES];
  for (int i = 0; i < LANES; ++i) s[i] = seed + (uint64_t)i * 0x9e3779b97f4a7c15ull;
  for (uint64_t r = 0; r < reps; ++r)
    for (int i = 0; i < LANES; ++i) {
      uint64_t x = s[i];
      x ^= x >> 31;
      x *= 0xbf58476d1ce4e5b9ull;
      x ^= x >> 27;
      x = (x << 13) | (x >> 51);
      s[i] = x + r;
    }
  uint64_t sum = 0;
  for (int i = 0; i < LANES; ++i) sum ^= s[i] + (uint64_t)i;
  return xc_reply(ctx, &sum, sizeof sum);
}

/* Integer work as benchmarks of embedded CPUs mix it (CoreMark's kinds): a linked list
 * reversed, searched and merge-sorted, a state machine over text (a switch), a small matrix
 * product, CRC-16 over the results: pointers, branches and table lookups. */
#define NODES 64
#define MAT 12
struct node {
  struct node *next;
  int16_t data, idx;
};

static uint16_t crc16(uint16_t crc, uint8_t byte) {
  for (int i = 0; i < 8; ++i) {
    const uint16_t mix = (uint16_t)((crc ^ byte) & 1);
    crc >>= 1;
    if (mix) crc ^= 0xa001;
    byte >>= 1;
  }
  return crc;
}

static struct node *list_reverse(struct node *l) {
  struct node *out = 0;
  while (l) {
    struct node *next = l->next;
    l->next = out;
    out = l;
    l = next;
  }
  return out;
}

static struct node *list_find(struct node *l, int16_t data) {
  while (l && l->data != data) l = l->next;
  return l;
}

/* Bottom-up merge sort by data, then idx (stable order for ties). */
static struct node *list_sort(struct node *l) {
  for (int width = 1;; width *= 2) {
    struct node *p = l, *tail = 0;
    int merges = 0;
    l = 0;
    while (p) {
      ++merges;
      struct node *q = p;
      int ps = 0, qs = width;
      while (q && ps < width) ++ps, q = q->next;
      while (ps > 0 || (qs > 0 && q)) {
        struct node *e;
        if (ps == 0) e = q, q = q->next, --qs;
        else if (qs == 0 || !q) e = p, p = p->next, --ps;
        else if (p->data < q->data || (p->data == q->data && p->idx <= q->idx)) e = p, p = p->next, --ps;
        else e = q, q = q->next, --qs;
        if (tail) tail->next = e;
        else l = e;
        tail = e;
      }
      p = q;
    }
    tail->next = 0;
    if (merges <= 1) return l;
  }
}

enum { S_START, S_INT, S_SIGN, S_FRAC, S_EXP, S_EXPSIGN, S_SCI, S_BAD };

/* Classifies comma-separated fields: counts of integers, decimals, scientific and invalid. */
static uint32_t scan_fields(const char *t, int n) {
  uint32_t counts[4] = {0, 0, 0, 0};
  int state = S_START;
  for (int i = 0; i <= n; ++i) {
    const char c = i < n ? t[i] : ',';
    if (c == ',') {
      counts[state == S_INT ? 0 : state == S_FRAC ? 1 : state == S_SCI ? 2 : 3]++;
      state = S_START;
      continue;
    }
    const int digit = c >= '0' && c <= '9';
    switch (state) {
      case S_START: state = digit ? S_INT : (c == '+' || c == '-') ? S_SIGN : c == '.' ? S_FRAC : S_BAD; break;
      case S_SIGN: state = digit ? S_INT : c == '.' ? S_FRAC : S_BAD; break;
      case S_INT: state = digit ? S_INT : c == '.' ? S_FRAC : (c == 'e' || c == 'E') ? S_EXP : S_BAD; break;
      case S_FRAC: state = digit ? S_FRAC : (c == 'e' || c == 'E') ? S_EXP : S_BAD; break;
      case S_EXP: state = digit ? S_SCI : (c == '+' || c == '-') ? S_EXPSIGN : S_BAD; break;
      case S_EXPSIGN: state = digit ? S_SCI : S_BAD; break;
      case S_SCI: state = digit ? S_SCI : S_BAD; break;
      default: break;
    }
  }
  return counts[0] | counts[1] << 8 | counts[2] << 16 | counts[3] << 24;
}

XC_ENTRY int intmix(xc_ctx *ctx, const void *in, size_t in_len) {
  uint64_t reps, seed;
  if (!read_args(in, in_len, &reps, &seed)) return 1;
  struct node *nodes = (struct node *)xc_alloc(ctx, sizeof(struct node) * NODES);
  int16_t *a = (int16_t *)xc_alloc(ctx, sizeof(int16_t) * MAT * MAT * 2);
  int32_t *c = (int32_t *)xc_alloc(ctx, sizeof(int32_t) * MAT * MAT);
  char *text = (char *)xc_alloc(ctx, 160);
  if (!nodes || !a || !c || !text) return 2;
  static const char *const fields[] = {"5012", "1.2e3", "-0.5", "abc", "+77", "3.14159", "-2e-9", "1e", "42", ".5E+1"};
  int n = 0;
  for (int f = 0; n < 150; f = (f + 3) % 10) {
    for (const char *p = fields[f]; *p && n < 150; ++p) text[n++] = *p;
    if (n < 150) text[n++] = ',';
  }
  struct node *list = 0;
  for (int i = NODES; i-- > 0;) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    nodes[i].data = (int16_t)(seed >> 52);
    nodes[i].idx = (int16_t)i;
    nodes[i].next = list;
    list = &nodes[i];
  }
  for (int i = 0; i < MAT * MAT * 2; ++i) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    a[i] = (int16_t)((seed >> 48) & 0x3ff) - 512;
  }
  uint16_t crc = 0;
  for (uint64_t r = 0; r < reps; ++r) {
    list = list_reverse(list);
    const struct node *hit = list_find(list, (int16_t)(r & 0x7ff));
    crc = crc16(crc, hit ? (uint8_t)hit->idx : 0xff);
    list = list_sort(list);
    crc = crc16(crc, (uint8_t)list->data);
    list->data = (int16_t)(list->data ^ (int16_t)r);  /* the next sort has work to do */
    const uint32_t counts = scan_fields(text, n);
    crc = crc16(crc, (uint8_t)counts);
    crc = crc16(crc, (uint8_t)(counts >> 24));
    text[r % (uint64_t)n] ^= 1;  /* and the next scan another text */
    for (int i = 0; i < MAT; ++i)
      for (int j = 0; j < MAT; ++j) {
        int32_t sum = 0;
        for (int k = 0; k < MAT; ++k) sum += (int32_t)a[i * MAT + k] * a[MAT * MAT + k * MAT + j];
        c[i * MAT + j] = sum;
      }
    for (int i = 0; i < MAT * MAT; ++i) crc = crc16(crc, (uint8_t)(c[i] >> 4));
    a[r % (MAT * MAT)] = (int16_t)(a[r % (MAT * MAT)] + (int16_t)crc);
  }
  const uint64_t sum = crc;
  return xc_reply(ctx, &sum, sizeof sum);
}

/* The input back as the reply: scripts/bench-invoke's bandwidth figure (64 MiB each way). */
XC_ENTRY int echo(xc_ctx *ctx, const void *in, size_t in_len) { return xc_reply(ctx, in, in_len); }
