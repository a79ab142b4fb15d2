// Typed errors and Result<T> for every libcargo call; the CLI alone maps them to exit codes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace xcargo {

// A small closed set of error kinds (see README "Exit codes" for how the CLI maps them).
enum class Errc {
  io,               // a file or directory could not be read or written
  invalid_argument, // the caller asked for something unusable (bad target, bad name)
  malformed,        // the bytes do not follow the format (bad magic, truncated, reserved bits)
  unsupported,      // well-formed but not understood: format version, critical section kind
  limit,            // a declared size or count is over a limit of the format or the caller
  digest_mismatch,  // stored bytes do not hash to their recorded SHA-256
  manifest,         // the manifest is not valid YAML or does not follow its schema
  not_signed,       // the cargo carries no signature at all
  untrusted,        // no signature is by a trusted key
  bad_signature,    // a signature by a trusted key does not verify
  revoked,          // a rule of the trust directory refuses this cargo (revoked digest, version too low)
  key,              // a key file is missing, unreadable, not an Ed25519 key, open to others, or its passphrase is wrong or missing
  compile,          // the compiler or linker failed on a kernel source
  import,           // a kernel imports a symbol outside the allowed API
  remote,           // a node ran the request and it failed (kernel error, crash, timeout)
  unreachable,      // a node could not be reached, or the connection to it was lost
  unauthenticated,  // a node refused this client's identity, or needs one it was not given
};

// Short stable name of an error kind ("digest_mismatch"); used in --json and test vectors.
const char* errc_name(Errc code);

// True for kinds that mean "this cargo must not be trusted" (CLI exit code 1).
bool is_verification_failure(Errc code);

class [[nodiscard]] Error {
public:
  Error(Errc code, std::string message, std::vector<std::string> hints = {})
      : code_(code), message_(std::move(message)), hints_(std::move(hints)) {}

  Errc code() const { return code_; }
  // Lowercase, no final period, says where: "section 2 (x86_64 object): digest mismatch".
  const std::string& message() const { return message_; }
  // What the user can do next, one line each.
  const std::vector<std::string>& hints() const { return hints_; }

  Error& hint(std::string line) {
    hints_.push_back(std::move(line));
    return *this;
  }
  // Prefixes the message with a location: "manifest: " + message.
  Error& within(const std::string& where) {
    message_ = where + ": " + message_;
    return *this;
  }

private:
  Errc code_;
  std::string message_;
  std::vector<std::string> hints_;
};

// Either a value or an Error. Check ok() before value().
template <class T>
class [[nodiscard]] Result {
public:
  Result(T value) : v_(std::move(value)) {}
  Result(Error error) : v_(std::move(error)) {}

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const Error& error() const { return std::get<1>(v_); }
  Error&& take_error() { return std::get<1>(std::move(v_)); }

private:
  std::variant<T, Error> v_;
};

// Success or an Error, for calls that return nothing. A success holds no Error: making and
// dropping one (a string and a vector) for every call that succeeds cost a warm invocation's
// client a few percent of its round trip.
class [[nodiscard]] Status {
public:
  Status() = default;
  Status(Error error) : error_(std::make_unique<Error>(std::move(error))) {}
  Status(const Status& o) : error_(o.error_ ? std::make_unique<Error>(*o.error_) : nullptr) {}
  Status& operator=(const Status& o) {
    if (this != &o) error_ = o.error_ ? std::make_unique<Error>(*o.error_) : nullptr;
    return *this;
  }
  Status(Status&&) noexcept = default;
  Status& operator=(Status&&) noexcept = default;

  bool ok() const { return !error_; }
  explicit operator bool() const { return ok(); }
  // Of a failed Status; of a success, an empty io error.
  const Error& error() const { return error_ ? *error_ : none(); }
  Error&& take_error() {
    if (!error_) error_ = std::make_unique<Error>(none());
    return std::move(*error_);
  }

private:
  static const Error& none() {
    static const Error e{Errc::io, ""};
    return e;
  }
  std::unique_ptr<Error> error_;
};

}  // namespace xcargo

// Returns early from the enclosing function with the error of a failed Result or Status.
#define XC_TRY(expr)                                   \
  do {                                                 \
    auto&& xc_try_r_ = (expr);                         \
    if (!xc_try_r_.ok()) return xc_try_r_.take_error(); \
  } while (0)
