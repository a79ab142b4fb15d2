// Little-endian packing of --arg values and arrays into a kernel's input, and decoding of
// reply bytes as --result types.
#include "values.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "xcargo/file.h"

namespace xcargo::cli {

namespace {

constexpr const char* kScalarTypes = "i32 i64 u32 u64 f32 f64 str";
constexpr const char* kArrayTypes = "u8[] i32[] i64[] u32[] u64[] f32[] f64[]";

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

// The size of one element of a numeric type (u8 only in arrays), 0 for any other name.
size_t width_of(const std::string& t) {
  if (t == "u8") return 1;
  if (t == "i32" || t == "u32" || t == "f32") return 4;
  if (t == "i64" || t == "u64" || t == "f64") return 8;
  return 0;
}

template <class T>
T element(ByteView bytes, size_t i) {
  T v;
  std::memcpy(&v, bytes.data() + i * sizeof(T), sizeof(T));
  return v;
}

template <class T>
std::string join_values(ByteView bytes, const char* fmt) {
  std::string s;
  char buf[64];
  for (size_t i = 0; i < bytes.size() / sizeof(T); ++i) {
    const T v = element<T>(bytes, i);
    if constexpr (std::is_floating_point_v<T>) std::snprintf(buf, sizeof buf, fmt, double(v));
    else std::snprintf(buf, sizeof buf, fmt, v);
    s += (s.empty() ? "" : " ") + std::string(buf);
  }
  return s;
}

template <class T>
nlohmann::json json_number(T v) {
  if constexpr (std::is_floating_point_v<T>) {
    if (!std::isfinite(v)) return nullptr;
    // The shortest decimal that reads back as this T, as a double: an f32's 0.1 stays 0.1.
    char buf[64];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
    *end = '\0';
    return std::strtod(buf, nullptr);
  } else {
    return v;
  }
}

template <class T>
nlohmann::json json_values(ByteView bytes, bool array) {
  const size_t n = bytes.size() / sizeof(T);
  if (n == 1 && !array) return json_number(element<T>(bytes, 0));
  nlohmann::json a = nlohmann::json::array();
  for (size_t i = 0; i < n; ++i) a.push_back(json_number(element<T>(bytes, i)));
  return a;
}

// A numeric --result's element type and whether it was T[] ("f32[]" -> "f32", true).
std::pair<std::string, bool> split_array(const std::string& type) {
  if (type.size() > 2 && type.compare(type.size() - 2, 2, "[]") == 0) return {type.substr(0, type.size() - 2), true};
  return {type, false};
}

// Checks that bytes hold whole values of a numeric --result type (at least one without []).
Status check_reply(const std::string& type, ByteView bytes) {
  const auto [elem, array] = split_array(type);
  const size_t w = width_of(elem);
  if (bytes.size() % w == 0 && (array || !bytes.empty())) return {};
  return Error(Errc::remote, "the reply has " + std::to_string(bytes.size()) + " bytes, not a whole number of " + elem +
                                 " values" + (array ? "" : " (one or more)"))
      .hint("--result hex shows the raw reply");
}

}  // namespace

Status pack_array(const std::string& elem, const std::string& name, ByteView bytes, Bytes& out) {
  const size_t w = width_of(elem);
  if (w == 0)
    return Error(Errc::invalid_argument, "'" + elem + "[]' is not an array type").hint(std::string("array types: ") + kArrayTypes);
  if (bytes.size() % w != 0)
    return Error(Errc::invalid_argument, name + ": " + std::to_string(bytes.size()) + " bytes, not a whole number of " + elem +
                                             " elements (" + std::to_string(w) + " bytes each)")
        .hint("--arg " + elem + "[]:FILE takes a file of little-endian " + elem + " values, nothing else; --input FILE "
              "passes a file's bytes as they are");
  out.resize((out.size() + kArrayAlign - 1) / kArrayAlign * kArrayAlign, 0);
  append<uint64_t>(out, bytes.size() / w);
  out.insert(out.end(), bytes.begin(), bytes.end());
  return {};
}

Status pack_arg(const std::string& spec, Bytes& out) {
  auto colon = spec.find(':');
  if (colon == std::string::npos)
    return Error(Errc::invalid_argument, "--arg '" + spec + "' is not TYPE:VALUE or TYPE[]:FILE")
        .hint(std::string("types: ") + kScalarTypes + ", e.g. --arg i64:42 --arg str:hello")
        .hint(std::string("arrays from files: ") + kArrayTypes + ", e.g. --arg f32[]:a.f32");
  const std::string type = spec.substr(0, colon), value = spec.substr(colon + 1);
  if (const auto [elem, array] = split_array(type); array) {
    if (width_of(elem) == 0) return pack_array(elem, value, ByteView(), out);  // says which types are
    if (value.empty()) return Error(Errc::invalid_argument, "--arg '" + spec + "': no file named").hint("e.g. --arg f32[]:a.f32");
    auto f = FileBytes::open(value, UINT64_MAX);
    if (!f.ok()) return Error(f.error().code(), value + ": " + f.error().message());
    return pack_array(elem, value, f->bytes(), out);
  }
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
        .hint(std::string("types: ") + kScalarTypes + "; arrays from files: " + kArrayTypes);
  return {};
}

bool is_result_type(const std::string& t) {
  if (t == "str" || t == "hex") return true;
  const auto [elem, array] = split_array(t);
  return width_of(elem) != 0 && (elem != "u8" || array);
}

Result<std::string> decode_result(const std::string& type, ByteView bytes) {
  if (type == "hex") return to_hex(bytes);
  if (type == "str") return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  if (!is_result_type(type)) return Error(Errc::invalid_argument, "--result '" + type + "' is not a known type");
  XC_TRY(check_reply(type, bytes));
  const std::string elem = split_array(type).first;
  if (elem == "u8") return join_values<uint8_t>(bytes, "%u");
  if (elem == "i32") return join_values<int32_t>(bytes, "%d");
  if (elem == "i64") return join_values<long long>(bytes, "%lld");
  if (elem == "u32") return join_values<uint32_t>(bytes, "%u");
  if (elem == "u64") return join_values<unsigned long long>(bytes, "%llu");
  if (elem == "f32") return join_values<float>(bytes, "%.9g");
  return join_values<double>(bytes, "%.17g");
}

Result<nlohmann::json> decode_result_json(const std::string& type, ByteView bytes) {
  if (type == "hex" || type == "str") {
    auto s = decode_result(type, bytes);
    XC_TRY(s);
    return nlohmann::json(*s);
  }
  if (!is_result_type(type)) return Error(Errc::invalid_argument, "--result '" + type + "' is not a known type");
  XC_TRY(check_reply(type, bytes));
  const auto [elem, array] = split_array(type);
  if (elem == "u8") return json_values<uint8_t>(bytes, array);
  if (elem == "i32") return json_values<int32_t>(bytes, array);
  if (elem == "i64") return json_values<int64_t>(bytes, array);
  if (elem == "u32") return json_values<uint32_t>(bytes, array);
  if (elem == "u64") return json_values<uint64_t>(bytes, array);
  if (elem == "f32") return json_values<float>(bytes, array);
  return json_values<double>(bytes, array);
}

}  // namespace xcargo::cli
