// Writes decoded bundle members into a directory so that nothing appears
// under a member's name until the whole bundle has been verified.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "store/bundle_reader.hpp"
#include "base/file_io.hpp"

namespace opcache::store {

/// Each member goes to a hidden temp file in `directory`; commit() renames
/// them all to their names (replacing existing files atomically, and never
/// following a symlink that sits at a name). Uncommitted temps are removed by
/// the destructor. The directory must exist; its path is resolved once, at
/// the first member, and every file is created and renamed relative to that
/// open directory, so a directory swapped for a symlink meanwhile changes
/// nothing. Member names are checked again (no '/', no "..").
class DirectorySink final : public MemberSink {
 public:
  explicit DirectorySink(std::filesystem::path directory) : m_directory(std::move(directory)) {}
  DirectorySink(const DirectorySink&) = delete;
  DirectorySink& operator=(const DirectorySink&) = delete;
  ~DirectorySink() override;

  Status begin(const MemberEntry& member) override;
  Status write(const char* data, std::size_t size) override;
  Status end(const MemberEntry& member) override;

  /// Publishes every member; returns the final paths in manifest order.
  Result<std::vector<std::filesystem::path>> commit();

 private:
  struct Pending {
    std::string temp;  ///< names in m_directory_fd
    std::string target;
  };

  Status open_directory();

  std::filesystem::path m_directory;
  base::FileDescriptor m_directory_fd;
  std::vector<Pending> m_pending;
  base::FileDescriptor m_current;
};

}  // namespace opcache::store
