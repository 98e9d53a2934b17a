#include "remote/remote_config.hpp"

#include <map>

#include "base/file_io.hpp"
#include "base/ini.hpp"
#include "base/try.hpp"
#include "base/value_parse.hpp"
#include "remote/curl_handle.hpp"
#include "remote/remote_store.hpp"

namespace opcache::remote {

namespace {

// An integer attribute from `min` to `max`; the error names the attribute and the value.
Result<std::int64_t> parse_count(const std::string& where, const std::string& text, std::int64_t min,
                                 std::int64_t max) {
  auto value = base::parse_integer(text, min, max);
  if (!value) {
    return base::value_error(where, text, value.error());
  }
  return value;
}

// A yes/no attribute: bare ("|upload") means true, else base::parse_bool's words.
Result<bool> parse_switch(const std::string& where, const std::string& text) {
  if (text.empty()) {
    return true;
  }
  auto value = base::parse_bool(text);
  if (!value) {
    return base::value_error(where, text, value.error());
  }
  return value;
}

Status apply_attribute(RemoteOptions& options, const std::string& name, const std::string& value,
                       const std::string& where) {
  const std::string at = where + ": " + name;
  if (name == "read-only" || name == "read_only") {
    OPCACHE_TRY_ASSIGN(options.read_only, parse_switch(at, value));
  } else if (name == "upload") {
    OPCACHE_TRY_ASSIGN(options.upload, parse_switch(at, value));
  } else if (name == "connect-timeout" || name == "connect_timeout") {
    OPCACHE_TRY_ASSIGN(options.connect_timeout_ms, parse_count(at, value, 0, 600000));
  } else if (name == "timeout") {
    OPCACHE_TRY_ASSIGN(options.timeout_ms, parse_count(at, value, 0, 3600000));
  } else if (name == "retries") {
    OPCACHE_TRY_ASSIGN(auto retries, parse_count(at, value, 0, 10));
    options.retries = static_cast<int>(retries);
  } else if (name == "parallelism") {
    OPCACHE_TRY_ASSIGN(auto parallelism, parse_count(at, value, 1, 256));
    options.parallelism = static_cast<int>(parallelism);
  } else if (name == "cooldown") {
    OPCACHE_TRY_ASSIGN(auto cooldown, parse_count(at, value, 0, 86400));
    options.cooldown_s = static_cast<int>(cooldown);
  } else if (name == "prefetch") {
    OPCACHE_TRY_ASSIGN(options.prefetch, parse_count(at, value, 0, 1000000));
  } else if (name == "ca-file" || name == "ca_file") {
    options.ca_file = value;
  } else {
    return Error::usage(at +
                        " is not a remote attribute (allowed: read-only, upload, connect-timeout, timeout, "
                        "retries, parallelism, cooldown, prefetch, ca-file)");
  }
  return {};
}

Status check_url(const std::string& url, const std::string& where) {
  if (find_remote_scheme(url) != nullptr) {
    return {};
  }
  return Error::usage(where + ": remote \"" + display_url(url) + "\" must start with " + remote_scheme_names());
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> items;
  std::string current;
  for (char c : text) {
    if (c == ';' || c == ' ' || c == '\t' || c == '\n') {
      if (!current.empty()) {
        items.push_back(current);
      }
      current.clear();
    } else {
      current.push_back(c);
    }
  }
  if (!current.empty()) {
    items.push_back(current);
  }
  return items;
}

Result<std::string> read_token(const std::filesystem::path& file) {
  auto text = base::read_file(file);
  if (!text) {
    return Error::usage("token file " + file.string() + ": " + text.error().message());
  }
  std::string token = *text;
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r' || token.back() == ' ')) {
    token.pop_back();
  }
  if (token.empty() || token.find_first_of("\r\n") != std::string::npos) {
    return Error::usage("token file " + file.string() + " must hold the token on one line");
  }
  return token;
}

// [remote "NAME"] sections of the config file, in file order.
Result<std::vector<RemoteOptions>> remotes_from_config(const std::filesystem::path& path) {
  auto text = base::read_file(path);
  if (!text) {
    if (text.error().code() == ErrorCode::not_found) {
      return std::vector<RemoteOptions>();
    }
    return text.error();
  }
  OPCACHE_TRY_ASSIGN(auto entries, base::parse_ini(*text, path.string()));
  std::vector<RemoteOptions> remotes;
  std::map<std::string, std::size_t> index;  // section title -> position in `remotes`
  for (const auto& entry : entries) {
    if (entry.section.rfind("remote", 0) != 0) {
      continue;
    }
    auto found = index.find(entry.section);
    if (found == index.end()) {
      RemoteOptions options;
      options.source = path.string() + " [" + entry.section + "]";
      remotes.push_back(options);
      found = index.emplace(entry.section, remotes.size() - 1).first;
    }
    RemoteOptions& options = remotes[found->second];
    if (entry.name == "url") {
      options.url = entry.value;
    } else if (entry.name == "token_file") {
      OPCACHE_TRY_ASSIGN(options.token, read_token(entry.value));
    } else {
      OPCACHE_TRY(apply_attribute(options, entry.name, entry.value, options.source));
    }
  }
  for (const auto& options : remotes) {
    if (options.url.empty()) {
      return Error::usage(options.source + " has no url");
    }
    OPCACHE_TRY(check_url(options.url, options.source));
  }
  return remotes;
}

}  // namespace

std::string display_url(const std::string& url) {
  return redact_url(url);
}

Result<RemoteOptions> parse_remote_spec(const std::string& spec, const std::string& source) {
  RemoteOptions options;
  options.source = source;
  std::size_t bar = spec.find('|');
  options.url = spec.substr(0, bar);
  OPCACHE_TRY(check_url(options.url, source));
  while (bar != std::string::npos) {
    std::size_t next = spec.find('|', bar + 1);
    std::string attribute = spec.substr(bar + 1, next == std::string::npos ? std::string::npos : next - bar - 1);
    auto equals = attribute.find('=');
    OPCACHE_TRY(apply_attribute(options, attribute.substr(0, equals),
                                equals == std::string::npos ? "" : attribute.substr(equals + 1),
                                source + " " + display_url(options.url)));
    bar = next;
  }
  return options;
}

Result<std::vector<RemoteOptions>> resolve_remotes(const RemoteOverrides& overrides, const base::EnvLookup& env,
                                                   const std::optional<std::filesystem::path>& config_file) {
  std::vector<RemoteOptions> remotes;
  if (overrides.no_remote) {
    return remotes;
  }
  if (!overrides.remotes.empty()) {
    for (const auto& spec : overrides.remotes) {
      OPCACHE_TRY_ASSIGN(auto options, parse_remote_spec(spec, "--remote"));
      remotes.push_back(options);
    }
  } else if (auto value = env("OPCACHE_REMOTE"); value && !value->empty()) {
    for (const auto& spec : split_list(*value)) {
      OPCACHE_TRY_ASSIGN(auto options, parse_remote_spec(spec, "OPCACHE_REMOTE"));
      remotes.push_back(options);
    }
  } else if (config_file) {
    OPCACHE_TRY_ASSIGN(remotes, remotes_from_config(*config_file));
  }
  std::optional<std::string> token;
  if (overrides.token_file) {
    OPCACHE_TRY_ASSIGN(token, read_token(*overrides.token_file));
  } else if (auto value = env("OPCACHE_TOKEN"); value && !value->empty()) {
    token = *value;
  }
  for (auto& options : remotes) {
    if (options.token.empty() && token) {
      options.token = *token;
    }
  }
  return remotes;
}

}  // namespace opcache::remote
