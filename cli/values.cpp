// Little-endian packing and decoding of the scalar types `xcargo run` understands.
#include "values.h"

#include <charconv>
#include <cstdio>
#include <cstring>
#include <limits>

namespace xcargo::cli {

namespace {

template <class T>
bool parse_int(const std::string& s, T& v) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && p == s.data() + s.size() && !s.empty();
}

template <class T>
bool parse_float(const std::string& s, T& v) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  double d = std::strtod(s.c_str(), &end);
  if (*end != '\0' || errno == ERANGE) return false;
  v = T(d);
  return true;
}

template <class T>
void append(Bytes& out, T v) {
  uint8_t b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));  // all supported hosts are little-endian
  out.insert(out.end(), b, b + sizeof(T));
}

template <class T>
std::string join_values(ByteView bytes, const char* fmt) {
  std::string s;
  char buf[64];
  for (size_t off = 0; off < bytes.size(); off += sizeof(T)) {
    T v;
    std::memcpy(&v, bytes.data() + off, sizeof(T));
    if constexpr (std::is_floating_point_v<T>) std::snprintf(buf, sizeof buf, fmt, double(v));
    else std::snprintf(buf, sizeof buf, fmt, v);
    s += (s.empty() ? "" : " ") + std::string(buf);
  }
  return s;
}

}  // namespace

Status pack_arg(const std::string& spec, Bytes& out) {
  auto colon = spec.find(':');
  if (colon == std::string::npos)
    return Error(Errc::invalid_argument, "--arg '" + spec + "' is not TYPE:VALUE")
        .hint("types: i32 i64 u32 u64 f32 f64 str, e.g. --arg i64:42 --arg str:hello");
  const std::string type = spec.substr(0, colon), value = spec.substr(colon + 1);
  auto bad = [&](const char* what) {
    return Error(Errc::invalid_argument, "--arg '" + spec + "': '" + value + "' is not " + what);
  };
  if (type == "i32") { int32_t v; if (!parse_int(value, v)) return bad("a 32-bit integer"); append(out, v); }
  else if (type == "i64") { int64_t v; if (!parse_int(value, v)) return bad("a 64-bit integer"); append(out, v); }
  else if (type == "u32") { uint32_t v; if (!parse_int(value, v)) return bad("an unsigned 32-bit integer"); append(out, v); }
  else if (type == "u64") { uint64_t v; if (!parse_int(value, v)) return bad("an unsigned 64-bit integer"); append(out, v); }
  else if (type == "f32") { float v; if (!parse_float(value, v)) return bad("a number"); append(out, v); }
  else if (type == "f64") { double v; if (!parse_float(value, v)) return bad("a number"); append(out, v); }
  else if (type == "str") out.insert(out.end(), value.begin(), value.end());
  else
    return Error(Errc::invalid_argument, "--arg '" + spec + "': unknown type '" + type + "'")
        .hint("types: i32 i64 u32 u64 f32 f64 str");
  return {};
}

bool is_result_type(const std::string& t) {
  for (const char* k : {"i32", "i64", "u32", "u64", "f32", "f64", "str", "hex"})
    if (t == k) return true;
  return false;
}

Result<std::string> decode_result(const std::string& type, ByteView bytes) {
  if (type == "hex") return to_hex(bytes);
  if (type == "str") return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  size_t width = type == "i32" || type == "u32" || type == "f32" ? 4 : 8;
  if (!is_result_type(type)) return Error(Errc::invalid_argument, "--result '" + type + "' is not a known type");
  if (bytes.empty() || bytes.size() % width)
    return Error(Errc::remote, "the reply has " + std::to_string(bytes.size()) + " bytes, not a whole number of " + type + " values")
        .hint("--result hex shows the raw reply");
  if (type == "i32") return join_values<int32_t>(bytes, "%d");
  if (type == "i64") return join_values<long long>(bytes, "%lld");
  if (type == "u32") return join_values<uint32_t>(bytes, "%u");
  if (type == "u64") return join_values<unsigned long long>(bytes, "%llu");
  if (type == "f32") return join_values<float>(bytes, "%.9g");
  return join_values<double>(bytes, "%.17g");
}

}  // namespace xcargo::cli
