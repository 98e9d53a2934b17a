#include "tests/support/files.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <sstream>
#include <thread>

#include "base/file_digest.hpp"
#include "tests/support/temp_dir.hpp"

namespace opcache::test {

namespace fs = std::filesystem;

Files directory_contents(const fs::path& dir) {
  Files files;
  std::error_code ec;
  for (const auto& item : fs::directory_iterator(dir, ec)) {
    if (item.is_regular_file()) {
      files[item.path().filename().string()] = read_text(item.path());
    }
  }
  return files;
}

Files read_files(const std::vector<fs::path>& paths) {
  Files files;
  for (const auto& path : paths) {
    files[path.filename().string()] = read_text(path);
  }
  return files;
}

std::set<std::string> entry_names(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& item : fs::directory_iterator(dir)) {
    names.insert(item.path().filename().string());
  }
  return names;
}

bool append_line(const fs::path& path, const std::string& line) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    return false;
  }
  std::string text = line + "\n";
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  return ok;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) {
      lines.push_back(line);
    }
  }
  return lines;
}

std::size_t count_lines(const fs::path& path) { return lines_of(read_text(path)).size(); }

std::map<std::string, int> builds_per_name(const fs::path& counter) {
  std::map<std::string, int> counts;
  for (const auto& line : lines_of(read_text(counter))) {
    ++counts[line.substr(0, line.find(' '))];
  }
  return counts;
}

void age_past_digest_too_new() {
  std::this_thread::sleep_for(std::chrono::nanoseconds(base::DigestCache::kTooNewNs) + std::chrono::milliseconds(20));
}

}  // namespace opcache::test
