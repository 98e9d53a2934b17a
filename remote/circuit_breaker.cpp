#include "remote/circuit_breaker.hpp"

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "base/file_io.hpp"
#include "base/safe_directory.hpp"
#include "base/sha256.hpp"

namespace opcache::remote {

std::string remote_id(const std::string& remote_name) { return base::sha256_hex(remote_name).substr(0, 16); }

CircuitBreaker::CircuitBreaker(std::filesystem::path state_dir, const std::string& remote_name, int cooldown_s,
                               std::function<std::int64_t()> clock_ms)
    : m_dir(std::move(state_dir)),
      m_file(m_dir / (remote_id(remote_name) + ".breaker")),
      m_name(remote_name),
      m_cooldown_s(cooldown_s),
      m_clock_ms(std::move(clock_ms)) {}

bool CircuitBreaker::allows() const {
  auto text = base::read_small_file(m_file);
  if (!text) {
    return true;
  }
  auto state = nlohmann::json::parse(*text, nullptr, false);
  if (!state.is_object()) {
    return true;
  }
  return m_clock_ms() >= state.value("open_until_ms", std::int64_t{0});
}

void CircuitBreaker::record_failure(const std::string& reason) {
  if (m_cooldown_s <= 0) {
    return;
  }
  nlohmann::json state = {{"remote", m_name},
                          {"open_until_ms", m_clock_ms() + std::int64_t{m_cooldown_s} * 1000},
                          {"reason", reason}};
  // Best effort: without the file each process finds out for itself.
  if (base::ensure_directory_beneath(m_dir.parent_path(), m_dir.filename())) {
    (void)base::write_file_atomic(m_file, state.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  }
}

void CircuitBreaker::record_success() { ::unlink(m_file.c_str()); }

}  // namespace opcache::remote
