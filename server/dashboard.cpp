#include "server/dashboard.hpp"

#include <cstdio>

namespace opcache::server {

namespace {

using json = nlohmann::json;

std::string escape_html(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

// A JSON value as table text: strings as they are, null as "-", numbers in
// JSON form (exactly what the API says).
std::string cell(const json& value) {
  if (value.is_null()) {
    return "-";
  }
  return escape_html(value.is_string() ? value.get<std::string>()
                                       : value.dump(-1, ' ', false, json::error_handler_t::replace));
}

// "Ascend910B1 · 8.0 · train · single" of a scenario object; "-" when unknown.
std::string scenario_cell(const json& scenario) {
  if (!scenario.is_object()) {
    return "-";
  }
  std::string text;
  for (const char* field : {"soc", "toolchain", "phase", "device_mode"}) {
    auto it = scenario.find(field);
    if (it != scenario.end() && it->is_string()) {
      text += (text.empty() ? "" : " \xc2\xb7 ") + it->get<std::string>();
    }
  }
  return escape_html(text);
}

std::string row(std::initializer_list<std::string> cells, const char* tag = "td") {
  std::string out = "<tr>";
  for (const auto& text : cells) {
    out += std::string("<") + tag + ">" + text + "</" + tag + ">";
  }
  return out + "</tr>\n";
}

std::string figures_table(const json& summary, const json& status) {
  std::string out = "<table><caption>Last " + cell(summary.value("window", json("day"))) + "</caption>\n";
  const std::pair<const char*, json> figures[] = {
      {"Hit rate", summary.value("hit_rate", json(nullptr))},
      {"Lookups", summary.value("lookups", json(0))},
      {"Hits", summary.value("hits", json(0))},
      {"Misses", summary.value("misses", json(0))},
      {"Bytes served", summary.value("bytes_served", json(0))},
      {"Compile time saved (ms)", summary.value("compile_ms_saved", json(0))},
      {"Uploads", summary.value("uploads", json(0))},
      {"Entries stored", status.value("entries", json(nullptr))},
      {"Bytes stored", status.value("bytes", json(nullptr))},
  };
  for (const auto& [label, value] : figures) {
    out += row({label, cell(value)});
  }
  return out + "</table>\n<p>Each kernel counts once per machine; kernels pulled or prefetched count as hits when "
               "they are transferred.</p>\n";
}

std::string op_types_table(const json& summary) {
  std::string out = "<table><caption>Top op types by hits</caption>\n" + row({"Op type", "Hits"}, "th");
  for (const auto& item : summary.value("top_op_types", json::array())) {
    out += row({cell(item.value("op_type", json(nullptr))), cell(item.value("hits", json(0)))});
  }
  return out + "</table>\n";
}

std::string misses_table(const json& misses) {
  std::string out = "<table><caption>What to pre-build next</caption>\n" +
                    row({"Op type", "Scenario", "Keys", "Requests", "Clients"}, "th");
  for (const auto& group : misses.value("groups", json::array())) {
    out += row({cell(group.value("op_type", json(nullptr))), scenario_cell(group.value("scenario", json(nullptr))),
                cell(group.value("keys", json(0))), cell(group.value("requests", json(0))),
                cell(group.value("clients", json(0)))});
  }
  return out + "</table>\n";
}

}  // namespace

ApiResponse ui_file(std::string_view file, const std::string& noscript_html) {
  if (file.empty()) {
    ApiResponse redirect = json_response(301, {{"location", "/ui/"}});
    redirect.headers.push_back({"Location", "/ui/"});
    return redirect;
  }
  for (const UiAsset& asset : ui_assets()) {
    if (asset.name != file) {
      continue;
    }
    ApiResponse response;
    response.content_type = asset.content_type;
    response.body = std::string(asset.bytes);
    if (asset.name == "index.html") {
      if (auto at = response.body.find(k_noscript_marker); at != std::string::npos) {
        response.body.replace(at, k_noscript_marker.size(), noscript_html);
      }
    }
    response.headers = {{"Content-Security-Policy", std::string(k_ui_content_security_policy)},
                        {"Cache-Control", "no-cache"},
                        {"X-Content-Type-Options", "nosniff"},
                        {"Referrer-Policy", "no-referrer"}};
    return response;
  }
  return error_response(404, "not_found", "the dashboard has no file \"" + std::string(file) + "\" (see /ui/)");
}

std::string render_noscript_tables(const json& summary, const json& status, const json& misses) {
  return "<section class=\"noscript\">\n" + figures_table(summary, status) + op_types_table(summary) +
         misses_table(misses) + "</section>";
}

std::string noscript_needs_token() {
  return "<p class=\"noscript\">This server needs a token, which the page sends with JavaScript. Without "
         "JavaScript, run <code>opcache stats --remote URL</code> in a terminal.</p>";
}

}  // namespace opcache::server
