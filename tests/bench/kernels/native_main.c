/* The native side of scripts/bench-kernels: runs an entry of scale.c, linked in as plain
 * C, the way the loader does (a context whose xc_alloc blocks are freed after the call, the
 * call alone timed). usage: native ENTRY REPS SEED RUNS -> one JSON object on stdout. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct xc_ctx {
  void *blocks[16];
  int nblocks;
  unsigned char reply[64];
  size_t reply_len;
};
typedef struct xc_ctx xc_ctx;
typedef int (*entry_fn)(xc_ctx *, const void *, size_t);

int xc_reply(xc_ctx *c, const void *data, size_t len) {
  if (len > sizeof c->reply - c->reply_len) return -1;
  memcpy(c->reply + c->reply_len, data, len);
  c->reply_len += len;
  return 0;
}
void *xc_alloc(xc_ctx *c, size_t len) {
  if (c->nblocks == 16) return NULL;
  void *p = aligned_alloc(64, (len + 63) / 64 * 64);  /* 64-byte blocks, as the loader's */
  if (p) c->blocks[c->nblocks++] = p;
  return p;
}
void xc_log(xc_ctx *c, const char *msg) { (void)c, (void)msg; }
uint32_t xc_node_id(xc_ctx *c) { return (void)c, 0; }
uint32_t xc_node_count(xc_ctx *c) { return (void)c, 1; }

int stencil(xc_ctx *, const void *, size_t);
int hash(xc_ctx *, const void *, size_t);
int intmix(xc_ctx *, const void *, size_t);

static int cmp(const void *a, const void *b) {
  const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: %s stencil|hash|intmix REPS SEED RUNS\n", argv[0]);
    return 2;
  }
  entry_fn f = strcmp(argv[1], "stencil") == 0 ? stencil
               : strcmp(argv[1], "hash") == 0  ? hash
               : strcmp(argv[1], "intmix") == 0 ? intmix
                                                : NULL;
  if (!f) {
    fprintf(stderr, "%s: no entry '%s' (entries: stencil, hash, intmix)\n", argv[0], argv[1]);
    return 2;
  }
  uint64_t in[2] = {strtoull(argv[2], NULL, 10), strtoull(argv[3], NULL, 10)};
  const int runs = atoi(argv[4]);
  if (runs < 1 || runs > 100000) return 2;
  int64_t *ns = malloc(sizeof *ns * (size_t)runs);
  uint64_t sum = 0;
  for (int i = 0; i < runs; ++i) {
    xc_ctx c;
    memset(&c, 0, sizeof c);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = f(&c, in, sizeof in);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    ns[i] = (int64_t)(t1.tv_sec - t0.tv_sec) * 1000000000 + (t1.tv_nsec - t0.tv_nsec);
    for (int b = 0; b < c.nblocks; ++b) free(c.blocks[b]);
    if (rc != 0 || c.reply_len != 8) {
      fprintf(stderr, "%s: %s returned %d with %zu reply bytes\n", argv[0], argv[1], rc, c.reply_len);
      return 1;
    }
    memcpy(&sum, c.reply, 8);
  }
  qsort(ns, (size_t)runs, sizeof *ns, cmp);
  printf("{\"median_ns\": %lld, \"min_ns\": %lld, \"checksum\": \"%016llx\", \"runs\": %d}\n", (long long)ns[runs / 2],
         (long long)ns[0], (unsigned long long)sum, runs);
  free(ns);
  return 0;
}
