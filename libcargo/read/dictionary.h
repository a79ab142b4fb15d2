// Built-in zstd dictionary 1 (format spec section 4.3), embedded from format-spec/dictionary/.
#pragma once

#include <zstd.h>

#include "xcargo/types.h"

namespace xcargo {

ByteView dictionary1();                   // the 16 KiB dictionary, as committed
const ZSTD_DDict* dictionary1_ddict();    // built on first use, shared, thread-safe; null on failure

}  // namespace xcargo
