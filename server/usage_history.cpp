#include "server/usage_history.hpp"

namespace opcache::server {

UsageHistory::UsageHistory(UsageStats& stats, std::optional<std::filesystem::path> state_dir) : m_stats(stats) {
  if (state_dir) {
    m_file = *state_dir / k_usage_file_name;
  }
}

std::optional<std::string> UsageHistory::load() {
  if (!m_file) {
    return std::nullopt;
  }
  auto loaded = m_stats.load(*m_file);
  if (loaded) {
    return std::nullopt;
  }
  auto aside = *m_file;
  aside += ".bad";
  std::error_code ec;
  std::filesystem::rename(*m_file, aside, ec);
  return "usage statistics start empty: " + loaded.error().message() +
         (ec ? "; could not move the file aside: " + ec.message() : "; the file was moved to " + aside.string());
}

std::optional<std::string> UsageHistory::save() const {
  if (!m_file) {
    return std::nullopt;
  }
  auto saved = m_stats.save(*m_file);
  return saved ? std::nullopt : std::optional<std::string>("usage statistics not saved: " + saved.error().message());
}

}  // namespace opcache::server
