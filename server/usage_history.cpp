#include "server/usage_history.hpp"

namespace opcache::server {

UsageHistory::UsageHistory(UsageStats& stats, std::optional<std::filesystem::path> state_dir) : m_stats(stats) {
  if (state_dir) {
    m_file = *state_dir / k_usage_file_name;
  }
}

void UsageHistory::share_through(remote::S3Client& client, std::string replica, int interval_s) {
  m_file.reset();
  m_team = std::make_unique<TeamUsage>(client, std::move(replica), m_stats);
  m_interval_s = interval_s;
}

std::optional<std::string> UsageHistory::load() {
  if (m_team) {
    return m_team->load();
  }
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
  if (m_team) {
    return m_team->save();
  }
  if (!m_file) {
    return std::nullopt;
  }
  auto saved = m_stats.save(*m_file);
  return saved ? std::nullopt : std::optional<std::string>("usage statistics not saved: " + saved.error().message());
}

std::vector<std::string> UsageHistory::refresh_team() { return m_team ? m_team->refresh() : std::vector<std::string>{}; }

}  // namespace opcache::server
