// The embedded dictionary's bytes (generated at build time) and its decompression form.
#include "read/dictionary.h"

namespace xcargo {

extern const unsigned char kDictionary1Bytes[];
extern const size_t kDictionary1BytesSize;

ByteView dictionary1() { return {kDictionary1Bytes, kDictionary1BytesSize}; }

const ZSTD_DDict* dictionary1_ddict() {
  static ZSTD_DDict* const ddict = ZSTD_createDDict(kDictionary1Bytes, kDictionary1BytesSize);
  return ddict;
}

}  // namespace xcargo
