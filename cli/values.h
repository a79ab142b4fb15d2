// Typed values on the command line: packing --arg TYPE:VALUE and TYPE[]:FILE into a kernel's
// input (README, "A kernel's input"), and decoding reply bytes with --result TYPE.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "xcargo/error.h"
#include "xcargo/types.h"

namespace xcargo::cli {

// Arrays start at the next multiple of this many bytes of the input (zero bytes fill the
// gap), with their element count as a little-endian u64 before the elements.
inline constexpr size_t kArrayAlign = 8;

// Appends one --arg to out. "TYPE:VALUE" (i32 i64 u32 u64 f32 f64 str): the value,
// little-endian, with no padding (str: the text's bytes, no length, no terminator).
// "T[]:FILE" (T one of u8 i32 i64 u32 u64 f32 f64): an array read from FILE ('-': standard
// input), as pack_array lays it out. Errors name the --arg, or the file.
Status pack_arg(const std::string& spec, Bytes& out);
// Appends an array of element type `elem` (u8 i32 i64 u32 u64 f32 f64) whose elements are
// `bytes` (read from the file `name`, for messages): zero bytes up to the next multiple of
// kArrayAlign of out's size, the element count as a u64, then bytes. Errc::invalid_argument
// when bytes is not a whole number of elements.
Status pack_array(const std::string& elem, const std::string& name, ByteView bytes, Bytes& out);

// Whether TYPE is one --result takes: i32 i64 u32 u64 f32 f64 (one value, or several),
// the same with [] (an array of any length, empty included), str, hex.
bool is_result_type(const std::string& type);
// The reply as TYPE in text: numbers separated by spaces, str as it is, hex in hex.
// Errc::remote when the reply is not a whole number of values (of at least one, without []).
Result<std::string> decode_result(const std::string& type, ByteView bytes);
// The same for --json: T[] a JSON array of numbers; T a number, or an array when the reply
// holds several; str and hex strings. f32 values keep their shortest decimal form (0.1, not
// 0.10000000149011612); NaN and infinities are null (JSON has no such numbers).
Result<nlohmann::json> decode_result_json(const std::string& type, ByteView bytes);

}  // namespace xcargo::cli
