// Minimal byte stream interfaces, so bundles can be encoded and decoded from
// files, sockets or memory with the same code.
#pragma once

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "opcache/result.hpp"
#include "base/sha256.hpp"

namespace opcache::base {

/// Something bytes are read from. `read` returns 0 only at the end.
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  virtual Result<std::size_t> read(void* buffer, std::size_t size) = 0;

  /// The rest of the bytes in place, all consumed, when the source holds them
  /// in memory that outlives it; nothing (and nothing consumed) otherwise.
  virtual std::optional<std::string_view> take_rest() { return std::nullopt; }
};

/// Something bytes are written to.
class ByteSink {
 public:
  virtual ~ByteSink() = default;
  virtual Status write(const void* data, std::size_t size) = 0;
};

/// Reads from a file descriptor it does not own.
class FdSource final : public ByteSource {
 public:
  FdSource(int fd, std::filesystem::path path) : m_fd(fd), m_path(std::move(path)) {}
  Result<std::size_t> read(void* buffer, std::size_t size) override;

 private:
  int m_fd;
  std::filesystem::path m_path;
};

/// Writes to a file descriptor it does not own.
class FdSink final : public ByteSink {
 public:
  FdSink(int fd, std::filesystem::path path) : m_fd(fd), m_path(std::move(path)) {}
  Status write(const void* data, std::size_t size) override;

 private:
  int m_fd;
  std::filesystem::path m_path;
};

/// Reads from a caller-owned buffer that must outlive the source.
class MemorySource final : public ByteSource {
 public:
  explicit MemorySource(std::string_view data) : m_data(data) {}
  Result<std::size_t> read(void* buffer, std::size_t size) override;
  std::optional<std::string_view> take_rest() override;

 private:
  std::string_view m_data;
};

/// Appends to a string.
class StringSink final : public ByteSink {
 public:
  Status write(const void* data, std::size_t size) override;
  std::string& data() noexcept { return m_data; }

 private:
  std::string m_data;
};

/// Forwards to another sink, hashing and counting what passes through.
class HashingSink final : public ByteSink {
 public:
  explicit HashingSink(ByteSink& inner) : m_inner(inner) {}
  Status write(const void* data, std::size_t size) override;
  std::uint64_t bytes() const noexcept { return m_bytes; }
  std::string finish_hex() { return m_hash.finish_hex(); }

 private:
  ByteSink& m_inner;
  Sha256 m_hash;
  std::uint64_t m_bytes = 0;
};

/// Forwards reads from another source, hashing and counting what passes through.
class HashingSource final : public ByteSource {
 public:
  explicit HashingSource(ByteSource& inner) : m_inner(inner) {}
  Result<std::size_t> read(void* buffer, std::size_t size) override;
  /// The inner source's rest in place, hashed and counted.
  std::optional<std::string_view> take_rest() override;
  std::uint64_t bytes() const noexcept { return m_bytes; }
  std::string finish_hex() { return m_hash.finish_hex(); }

 private:
  ByteSource& m_inner;
  Sha256 m_hash;
  std::uint64_t m_bytes = 0;
};

}  // namespace opcache::base
