/* A second source: several sources link into one payload per variant. */
#include <stdint.h>

int64_t twice(int64_t x) { return 2 * x; }
