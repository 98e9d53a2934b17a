// The dashboard of `opcache serve` (GET /ui/): static files compiled into the
// binary (server/ui/, embedded by cmake/EmbedUi.cmake), served with a
// Content-Security-Policy that lets the page talk only to this server. The
// page itself holds no data: its script reads /v1/status and /v1/stats/*
// with the user's token. Without JavaScript, the page shows the same
// figures in tables the server renders into it (render_noscript_tables).
#pragma once

#include <span>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "server/api.hpp"

namespace opcache::server {

/// One embedded file of the dashboard.
struct UiAsset {
  std::string_view name;          ///< "index.html", "style.css" or "app.js"
  std::string_view content_type;
  std::string_view bytes;
};

/// The embedded files (generated: build/generated/server/ui_assets.cpp).
std::span<const UiAsset> ui_assets();

/// Where index.html's <noscript> content goes.
inline constexpr std::string_view k_noscript_marker = "<!--opcache:noscript-->";

/// The Content-Security-Policy of every /ui/ response: scripts, styles and
/// requests only from this server, no inline code, no frames.
inline constexpr std::string_view k_ui_content_security_policy =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

/// The response for GET /ui/{file}: "" (the path /ui) is a 301 to /ui/;
/// "index.html" is the page with `noscript_html` in place of the marker;
/// a file that is not embedded is 404. With an ETag, `Cache-Control:
/// no-cache` and the security headers. Thread-safe.
ApiResponse ui_file(std::string_view file, const std::string& noscript_html);

/// The HTML (escaped) put into <noscript> when the request for the page may
/// read: the summary figures, the entries stored (`status`), the top op
/// types and the misses groups, as tables.
std::string render_noscript_tables(const nlohmann::json& summary, const nlohmann::json& status,
                                   const nlohmann::json& misses);

/// What <noscript> says when the request for the page may not read.
std::string noscript_needs_token();

}  // namespace opcache::server
