/* Dictionary corpus: CRC-32 (IEEE) with a table built per call. */
#include <xcargo/kernel.h>
static void make_table(uint32_t *t) {
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    t[i] = c;
  }
}
XC_ENTRY int crc32(xc_ctx *ctx, const void *in, size_t in_len) {
  uint32_t t[256], c = 0xFFFFFFFFu;
  make_table(t);
  const uint8_t *p = (const uint8_t *)in;
  for (size_t i = 0; i < in_len; ++i) c = t[(c ^ p[i]) & 0xFF] ^ (c >> 8);
  c ^= 0xFFFFFFFFu;
  return xc_reply(ctx, &c, 4);
}
