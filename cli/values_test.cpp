// Tests of `xcargo run`'s input packing (--arg scalars, T[]:FILE arrays, their padding and
// length prefixes) and of --result decoding, text and JSON, bad inputs included.
#include <catch2/catch.hpp>

#include <cstring>
#include <fstream>

#include "support.h"
#include "values.h"

using namespace xcargo;
using namespace xcargo::cli;

namespace {

Bytes packed(std::initializer_list<std::string> specs) {
  Bytes out;
  for (const auto& s : specs) {
    auto st = pack_arg(s, out);
    INFO(s);
    REQUIRE(st.ok());
  }
  return out;
}

std::string hex_of(const Bytes& b) { return to_hex(b); }

void write(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

Bytes floats(std::initializer_list<float> v) {
  Bytes b(v.size() * 4);
  std::memcpy(b.data(), std::data(v), b.size());
  return b;
}

}  // namespace

TEST_CASE("scalars are packed little-endian in order, with no padding", "[values]") {
  CHECK(hex_of(packed({"i32:1", "i64:-2"})) == "01000000" "feffffffffffffff");
  CHECK(hex_of(packed({"u32:4294967295", "f32:1.5", "f64:0.5"})) == "ffffffff" "0000c03f" "000000000000e03f");
  CHECK(hex_of(packed({"u64:18446744073709551615", "str:a:b"})) == "ffffffffffffffff" "613a62");
}

TEST_CASE("an array is padded to 8, prefixed with its u64 count, then its elements", "[values]") {
  test::ScratchDir dir;
  const Bytes a = floats({1, 2, 3});
  write(dir / "a.f32", std::string(a.begin(), a.end()));
  write(dir / "b.u8", "xyz");
  write(dir / "empty", "");
  // An i32 (4 bytes), 4 zero bytes, the count 3, 12 bytes of floats (ends at 28), 4 zero
  // bytes, the count 3, then "xyz", an empty array's padding and count.
  const Bytes in = packed({"i32:7", "f32[]:" + (dir / "a.f32"), "u8[]:" + (dir / "b.u8"), "i64[]:" + (dir / "empty")});
  CHECK(hex_of(in) == "07000000" "00000000" "0300000000000000" "0000803f" "00000040" "00004040"
                      "00000000" "0300000000000000" "78797a" "0000000000" "0000000000000000");
  CHECK(in.size() % 8 == 0);
  // Already at a multiple of 8: no padding.
  CHECK(hex_of(packed({"i64:1", "u8[]:" + (dir / "b.u8")})) == "0100000000000000" "0300000000000000" "78797a");
}

TEST_CASE("an array file that is not a whole number of elements is refused, naming the file", "[values]") {
  test::ScratchDir dir;
  write(dir / "odd.f32", "1234567");
  Bytes out;
  auto s = pack_arg("f32[]:" + (dir / "odd.f32"), out);
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().code() == Errc::invalid_argument);
  CHECK(s.error().message() == dir / "odd.f32" + ": 7 bytes, not a whole number of f32 elements (4 bytes each)");
  REQUIRE_FALSE(s.error().hints().empty());
  CHECK(s.error().hints()[0].find("--arg f32[]:FILE") != std::string::npos);
  CHECK(out.empty());
  CHECK_FALSE(pack_arg("f64[]:" + (dir / "odd.f32"), out).ok());
  CHECK(pack_arg("u8[]:" + (dir / "odd.f32"), out).ok());
}

TEST_CASE("bad --arg specs are refused with what is wrong", "[values]") {
  test::ScratchDir dir;
  Bytes out;
  auto message = [&](const std::string& spec) {
    auto s = pack_arg(spec, out);
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().code() == (spec.find("missing") != std::string::npos ? Errc::io : Errc::invalid_argument));
    return s.error().message();
  };
  CHECK(message("42") == "--arg '42' is not TYPE:VALUE or TYPE[]:FILE");
  CHECK(message("i32:3000000000") == "--arg 'i32:3000000000': '3000000000' is not a 32-bit integer");
  CHECK(message("u32:-1") == "--arg 'u32:-1': '-1' is not an unsigned 32-bit integer");
  CHECK(message("f64:1e999") == "--arg 'f64:1e999': '1e999' is not a number");
  CHECK(message("i16:1") == "--arg 'i16:1': unknown type 'i16'");
  CHECK(message("str[]:x") == "'str[]' is not an array type");
  CHECK(message("f32[]:") == "--arg 'f32[]:': no file named");
  CHECK(message("f32[]:" + (dir / "missing")).find(dir / "missing" + ": cannot open") == 0);
  CHECK(out.empty());
}

TEST_CASE("--result types", "[values]") {
  for (const char* t : {"i32", "i64", "u32", "u64", "f32", "f64", "str", "hex", "u8[]", "i32[]", "f32[]", "f64[]", "u64[]"})
    CHECK(is_result_type(t));
  for (const char* t : {"u8", "i16", "str[]", "hex[]", "[]", "f32[][]", ""}) CHECK_FALSE(is_result_type(t));
}

TEST_CASE("replies decode as text and as JSON numbers and arrays", "[values]") {
  const Bytes three = floats({0.1f, -2, 3.5f});
  CHECK(*decode_result("f32", three) == "0.100000001 -2 3.5");  // text as it always was
  CHECK(decode_result_json("f32[]", three)->dump() == "[0.1,-2.0,3.5]");
  CHECK(decode_result_json("f32", three)->dump() == "[0.1,-2.0,3.5]");  // several: an array
  const Bytes one = floats({0.1f});
  CHECK(decode_result_json("f32", one)->dump() == "0.1");
  CHECK(decode_result_json("f32[]", one)->dump() == "[0.1]");
  CHECK(decode_result_json("f32[]", Bytes())->dump() == "[]");
  Bytes i64(8);
  const int64_t v = -42;
  std::memcpy(i64.data(), &v, 8);
  CHECK(decode_result_json("i64", i64)->dump() == "-42");
  CHECK(decode_result_json("u64", Bytes(8, 0xff))->dump() == "18446744073709551615");
  CHECK(decode_result_json("u8[]", Bytes{1, 2})->dump() == "[1,2]");
  CHECK(decode_result_json("str", Bytes{'h', 'i'})->dump() == "\"hi\"");
  CHECK(decode_result_json("f64[]", Bytes{0, 0, 0, 0, 0, 0, 0xf8, 0x7f})->dump() == "[null]");  // NaN
}

TEST_CASE("a reply that is not whole values is refused", "[values]") {
  auto r = decode_result("f32[]", Bytes(6));
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == Errc::remote);
  CHECK(r.error().message() == "the reply has 6 bytes, not a whole number of f32 values");
  auto empty = decode_result_json("i64", Bytes());
  REQUIRE_FALSE(empty.ok());
  CHECK(empty.error().message() == "the reply has 0 bytes, not a whole number of i64 values (one or more)");
  CHECK(decode_result("i64[]", Bytes()).ok());
}
