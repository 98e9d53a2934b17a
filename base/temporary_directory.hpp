// A directory that exists for one scope: created with a random name under a
// parent (a build's work directory, a compiler's staging directory) and
// removed, with whatever is left in it, when its owner goes away.
#pragma once

#include <filesystem>
#include <string_view>

#include "opcache/result.hpp"

namespace opcache::base {

/// Owns a directory tree and removes it in its destructor (errors ignored:
/// a destructor never throws, and what is left is a stray directory, never
/// a wrong result). Move-only; a moved-from object owns nothing.
class TemporaryDirectory {
 public:
  /// Creates `parent/<prefix><random token>` (the parent must exist; being
  /// on the parent's file system makes publishing out of it a rename).
  /// `io` error naming the path when it cannot be created.
  static Result<TemporaryDirectory> create(const std::filesystem::path& parent, std::string_view prefix);

  TemporaryDirectory(TemporaryDirectory&& other) noexcept;
  TemporaryDirectory& operator=(TemporaryDirectory&& other) noexcept;
  TemporaryDirectory(const TemporaryDirectory&) = delete;
  TemporaryDirectory& operator=(const TemporaryDirectory&) = delete;
  ~TemporaryDirectory();

  /// The directory's path; empty when moved from.
  const std::filesystem::path& path() const noexcept { return m_path; }

 private:
  explicit TemporaryDirectory(std::filesystem::path path) noexcept : m_path(std::move(path)) {}
  void remove() noexcept;

  std::filesystem::path m_path;
};

}  // namespace opcache::base
