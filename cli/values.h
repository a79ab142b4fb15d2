// Typed values on the command line: packing --arg TYPE:VALUE into input bytes, and decoding
// reply bytes with --result TYPE.
#pragma once

#include <string>
#include <vector>

#include "xcargo/error.h"
#include "xcargo/types.h"

namespace xcargo::cli {

// Appends one "TYPE:VALUE" (i32 i64 u32 u64 f32 f64 str), little-endian, to out.
Status pack_arg(const std::string& spec, Bytes& out);

// Decodes bytes as TYPE (i32 i64 u32 u64 f32 f64 str hex). Numeric types decode every
// element when the reply holds several, separated by spaces.
Result<std::string> decode_result(const std::string& type, ByteView bytes);
// The same values for --json: numbers as JSON numbers, str and hex as strings.
bool is_result_type(const std::string& type);

}  // namespace xcargo::cli
