#include "base/temporary_directory.hpp"

#include <string>
#include <system_error>
#include <utility>

#include "base/file_io.hpp"

namespace opcache::base {

Result<TemporaryDirectory> TemporaryDirectory::create(const std::filesystem::path& parent, std::string_view prefix) {
  std::filesystem::path path = parent / (std::string(prefix) + random_token());
  std::error_code ec;
  if (!std::filesystem::create_directory(path, ec) || ec) {
    return Error::io("cannot create directory " + path.string() + ": " +
                     (ec ? ec.message() : std::string("it exists already")));
  }
  return TemporaryDirectory(std::move(path));
}

TemporaryDirectory::TemporaryDirectory(TemporaryDirectory&& other) noexcept : m_path(std::exchange(other.m_path, {})) {}

TemporaryDirectory& TemporaryDirectory::operator=(TemporaryDirectory&& other) noexcept {
  if (this != &other) {
    remove();
    m_path = std::exchange(other.m_path, {});
  }
  return *this;
}

TemporaryDirectory::~TemporaryDirectory() {
  remove();
}

void TemporaryDirectory::remove() noexcept {
  if (!m_path.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(m_path, ec);
  }
}

}  // namespace opcache::base
