#include "server/access_log.hpp"

#include <cerrno>
#include <cstring>
#include <ctime>

#include <nlohmann/json.hpp>

#include "store/manifest.hpp"

namespace opcache::server {

Result<AccessLog> AccessLog::open(const std::filesystem::path& path, LogFormat format) {
  if (path.empty() || path == "-") {
    return AccessLog(stderr, false, format);
  }
  std::FILE* file = std::fopen(path.c_str(), "a");
  if (file == nullptr) {
    return Error::io("cannot open access log " + path.string() + ": " + std::strerror(errno));
  }
  return AccessLog(file, true, format);
}

AccessLog::AccessLog(AccessLog&& other) noexcept
    : m_file(other.m_file), m_owned(other.m_owned), m_format(other.m_format) {
  other.m_owned = false;
}

AccessLog::~AccessLog() {
  if (m_owned) {
    std::fclose(m_file);
  }
}

void AccessLog::write(const AccessRecord& record) {
  std::string line;
  const std::string time = store::rfc3339_now();
  if (m_format == LogFormat::json) {
    nlohmann::json object = {{"time", time},
                             {"client", record.client},
                             {"method", record.method},
                             {"target", record.target},
                             {"status", record.status},
                             {"bytes_in", record.bytes_in},
                             {"bytes_out", record.bytes_out},
                             {"duration_ms", record.seconds * 1000.0},
                             {"token", record.token_name}};
    line = object.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  } else {
    char duration[32];
    std::snprintf(duration, sizeof duration, "%.3f", record.seconds * 1000.0);
    line = time + " " + record.client + " " + record.method + " " + record.target + " " +
           std::to_string(record.status) + " in=" + std::to_string(record.bytes_in) +
           " out=" + std::to_string(record.bytes_out) + " " + duration + "ms token=" + record.token_name + "\n";
  }
  std::lock_guard lock(m_mutex);
  std::fwrite(line.data(), 1, line.size(), m_file);
  std::fflush(m_file);
}

void AccessLog::event(const std::string& message) {
  std::string line;
  if (m_format == LogFormat::json) {
    line = nlohmann::json{{"time", store::rfc3339_now()}, {"event", message}}.dump() + "\n";
  } else {
    line = store::rfc3339_now() + " opcache serve: " + message + "\n";
  }
  std::lock_guard lock(m_mutex);
  std::fwrite(line.data(), 1, line.size(), m_file);
  std::fflush(m_file);
}

}  // namespace opcache::server
