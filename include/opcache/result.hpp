// opcache — error vocabulary shared by the library, the CLI and the server.
//
// Every fallible operation returns `Result<T>`: either a value or an `Error`.
// Absence is not an error: lookups return `Result<std::optional<T>>`.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace opcache {

/// What kind of failure an `Error` is. The numeric values are stable: the CLI
/// uses `exit_code_for()` and the C ABI mirrors them as `opcache_status`.
enum class ErrorCode {
  not_found = 1,     ///< the named thing does not exist (file, key, entry)
  usage = 2,         ///< bad argument, bad configuration, malformed input
  corrupt = 3,       ///< integrity failure: digest mismatch, torn or forged data
  remote = 4,        ///< a remote store or server failed or misbehaved
  io = 5,            ///< local file system or database failure
  timeout = 6,       ///< a wait (lock, single flight, network) ran out of time
  build_failed = 7,  ///< a build callback or command reported failure
  internal = 8,      ///< a bug: an invariant of opcache itself was broken
  untrusted = 9,     ///< a signature requirement refused it: unsigned, untrusted signer, bad signature
};

/// Human-readable lowercase name of a code ("not_found", "corrupt", ...).
const char* error_code_name(ErrorCode code) noexcept;

/// A failure: a code and a one-line message that says what failed, on which
/// file/key/field, and (where useful) what to do about it.
class Error {
 public:
  Error(ErrorCode code, std::string message) : m_code(code), m_message(std::move(message)) {}

  static Error not_found(std::string message) { return {ErrorCode::not_found, std::move(message)}; }
  static Error usage(std::string message) { return {ErrorCode::usage, std::move(message)}; }
  static Error corrupt(std::string message) { return {ErrorCode::corrupt, std::move(message)}; }
  static Error remote(std::string message) { return {ErrorCode::remote, std::move(message)}; }
  static Error io(std::string message) { return {ErrorCode::io, std::move(message)}; }
  static Error timeout(std::string message) { return {ErrorCode::timeout, std::move(message)}; }
  static Error build_failed(std::string message) { return {ErrorCode::build_failed, std::move(message)}; }
  static Error internal(std::string message) { return {ErrorCode::internal, std::move(message)}; }
  static Error untrusted(std::string message) { return {ErrorCode::untrusted, std::move(message)}; }

  ErrorCode code() const noexcept { return m_code; }
  const std::string& message() const noexcept { return m_message; }

  /// A copy whose message is prefixed with `context + ": "`.
  Error with_context(const std::string& context) const { return {m_code, context + ": " + m_message}; }

 private:
  ErrorCode m_code;
  std::string m_message;
};

/// Either a `T` or an `Error`. Accessing the wrong alternative is a bug and
/// throws `std::bad_variant_access`.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : m_state(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit by design
  Result(Error error) : m_state(std::in_place_index<1>, std::move(error)) {}  // NOLINT

  bool ok() const noexcept { return m_state.index() == 0; }
  explicit operator bool() const noexcept { return ok(); }

  T& value() & { return std::get<0>(m_state); }
  const T& value() const& { return std::get<0>(m_state); }
  T&& value() && { return std::get<0>(std::move(m_state)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const { return std::get<1>(m_state); }

 private:
  std::variant<T, Error> m_state;
};

/// Success without a value, or an `Error`.
template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : m_error(std::move(error)) {}  // NOLINT: implicit by design

  bool ok() const noexcept { return !m_error.has_value(); }
  explicit operator bool() const noexcept { return ok(); }
  const Error& error() const { return *m_error; }

 private:
  std::optional<Error> m_error;
};

using Status = Result<void>;

}  // namespace opcache
