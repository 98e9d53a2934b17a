#include "base/json_parse.hpp"

#include <set>
#include <vector>

#include "base/utf8.hpp"
#include "base/file_io.hpp"
#include "base/try.hpp"

namespace opcache::base {

namespace {

using json = nlohmann::json;

// Tracks the keys of every open object so a repeated key can be reported; the
// default nlohmann behaviour (last one wins) would hash a different descriptor
// than the one a reader of the file sees first.
class DuplicateKeyDetector {
 public:
  bool on_event(int depth, json::parse_event_t event, json& parsed) {
    if (depth > k_max_json_depth) {
      m_problem = "nesting deeper than " + std::to_string(k_max_json_depth) + " levels";
      return false;
    }
    switch (event) {
      case json::parse_event_t::object_start:
        m_open_objects.emplace_back();
        break;
      case json::parse_event_t::key: {
        const auto& key = parsed.get_ref<const std::string&>();
        if (!m_open_objects.empty() && !m_open_objects.back().insert(key).second && m_problem.empty()) {
          m_problem = "duplicate object key \"" + key + "\"";
        }
        break;
      }
      case json::parse_event_t::object_end:
        if (!m_open_objects.empty()) {
          m_open_objects.pop_back();
        }
        break;
      default:
        break;
    }
    return true;
  }

  const std::string& problem() const { return m_problem; }

 private:
  std::vector<std::set<std::string>> m_open_objects;
  std::string m_problem;
};

// Error messages quote input; keep them one clean line whatever the input was.
// Control characters always become '?'; non-ASCII bytes too unless the whole
// text is valid UTF-8.
std::string printable(std::string text) {
  const bool keep_non_ascii = is_valid_utf8(text);
  for (char& c : text) {
    auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f || (byte >= 0x80 && !keep_non_ascii)) {
      c = '?';
    }
  }
  return text;
}

}  // namespace

Result<json> parse_json(std::string_view text, const std::string& origin) {
  DuplicateKeyDetector detector;
  json::parser_callback_t callback = [&detector](int depth, json::parse_event_t event, json& parsed) {
    return detector.on_event(depth, event, parsed);
  };
  json value;
  try {
    value = json::parse(text.begin(), text.end(), callback, /*allow_exceptions=*/true,
                        /*ignore_comments=*/false);
  } catch (const json::exception& e) {
    if (!detector.problem().empty()) {
      return Error::usage(origin + ": invalid JSON: " + printable(detector.problem()));
    }
    // nlohmann's messages start with "[json.exception.parse_error.101] "; keep the useful tail.
    std::string message = e.what();
    if (auto pos = message.find("] "); pos != std::string::npos) {
      message.erase(0, pos + 2);
    }
    return Error::usage(origin + ": invalid JSON: " + printable(message));
  }
  if (!detector.problem().empty()) {
    return Error::usage(origin + ": invalid JSON: " + printable(detector.problem()));
  }
  return value;
}

Result<json> load_json_file(const std::filesystem::path& path) {
  OPCACHE_TRY_ASSIGN(std::string text, read_file(path));
  return parse_json(text, path.string());
}

}  // namespace opcache::base
