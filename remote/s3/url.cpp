#include "remote/s3/url.hpp"

#include <algorithm>
#include <cctype>
#include <memory>
#include <optional>

#include <curl/curl.h>

#include "base/percent_coding.hpp"
#include "base/try.hpp"
#include "base/utf8.hpp"
#include "base/value_parse.hpp"
#include "remote/curl_library.hpp"
#include "remote/s3/text.hpp"

namespace opcache::remote {

namespace {

constexpr std::string_view k_scheme = "s3://";

Error url_error(std::string_view url, const std::string& what) {
  return Error::usage("S3 URL " + single_quoted(url) + ": " + what);
}

bool is_ipv4_literal(std::string_view host) {
  int parts = 0;
  while (!host.empty()) {
    const std::size_t dot = host.find('.');
    const std::string_view part = host.substr(0, dot);
    if (part.empty() || part.size() > 3 ||
        !std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return false;
    }
    ++parts;
    host = dot == std::string_view::npos ? std::string_view() : host.substr(dot + 1);
  }
  return parts == 4;
}

// Empty when `bucket` is a valid S3 bucket name, else why not.
std::string bucket_problem(std::string_view bucket) {
  if (bucket.size() < 3 || bucket.size() > 63) {
    return "must be 3 to 63 characters long";
  }
  for (char c : bucket) {
    if (!(std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '.' ||
          c == '-')) {
      return std::string("contains ") + single_quoted(std::string(1, c)) + " (allowed: lowercase letters, digits, '.', '-')";
    }
  }
  if (!std::isalnum(static_cast<unsigned char>(bucket.front())) ||
      !std::isalnum(static_cast<unsigned char>(bucket.back()))) {
    return "must start and end with a letter or digit";
  }
  if (bucket.find("..") != std::string_view::npos) {
    return "must not contain '..'";
  }
  if (is_ipv4_literal(bucket)) {
    return "must not look like an IP address";
  }
  return {};
}

Result<std::string> parse_prefix(std::string_view url, std::string_view raw) {
  auto decoded = base::percent_decode(raw);
  if (!decoded) {
    return url_error(url, "the prefix " + single_quoted(raw) + " has a malformed %-escape");
  }
  std::string prefix = std::move(*decoded);
  if (!prefix.empty() && prefix.back() == '/') {
    prefix.pop_back();
  }
  if (prefix.empty()) {
    return prefix;
  }
  if (!base::is_valid_utf8(prefix) || has_control_character(prefix)) {
    return url_error(url, "the prefix must be UTF-8 text without control characters");
  }
  std::string_view rest = prefix;
  while (true) {
    const std::size_t slash = rest.find('/');
    const std::string_view segment = rest.substr(0, slash);
    if (segment.empty() || segment == "." || segment == "..") {
      return url_error(url, "the prefix " + single_quoted(prefix) + " has an empty, '.' or '..' segment");
    }
    if (slash == std::string_view::npos) {
      break;
    }
    rest.remove_prefix(slash + 1);
  }
  if (prefix.size() > k_max_s3_key_bytes / 2) {
    return url_error(url, "the prefix is longer than " + std::to_string(k_max_s3_key_bytes / 2) + " bytes");
  }
  return prefix;
}

// An owned libcurl URL handle.
using UrlHandle = std::unique_ptr<CURLU, decltype(&curl_url_cleanup)>;

// One part of a parsed URL; nullopt when absent.
std::optional<std::string> url_part(CURLU* parsed, CURLUPart part) {
  char* value = nullptr;
  if (curl_url_get(parsed, part, &value, 0) != CURLUE_OK || value == nullptr) {
    return std::nullopt;
  }
  std::string text(value);
  curl_free(value);
  return text;
}

// Checks "http(s)://host[:port][/]" with libcurl's URL parser and returns it
// without the trailing slash.
Result<std::string> parse_endpoint(std::string_view url, std::string_view endpoint) {
  const auto bad = [&](const std::string& why) {
    return url_error(url, "endpoint " + single_quoted(endpoint) + " " + why);
  };
  const std::size_t scheme_end = endpoint.find("://");
  const std::string_view scheme = endpoint.substr(0, scheme_end);
  if (scheme_end == std::string_view::npos || (scheme != "http" && scheme != "https")) {
    return bad("must start with http:// or https://");
  }
  std::string_view authority = endpoint.substr(scheme_end + 3);
  if (!authority.empty() && authority.back() == '/') {
    authority.remove_suffix(1);
  }
  if (authority.find('@') != std::string_view::npos) {
    return bad("must not contain credentials; use AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or ~/.aws/credentials");
  }
  OPCACHE_TRY(load_curl());
  UrlHandle parsed(curl_url(), &curl_url_cleanup);
  if (!parsed) {
    return Error::internal("cannot allocate a libcurl URL handle");
  }
  const std::size_t port_start = authority.rfind(':');
  const bool has_port = port_start != std::string_view::npos && authority.substr(port_start).find(']') ==
                                                                        std::string_view::npos;
  const CURLUcode code = curl_url_set(parsed.get(), CURLUPART_URL, std::string(endpoint).c_str(), 0);
  // libcurl accepts an empty port ("host:") and port 0; we do not.
  const std::string_view port = has_port ? authority.substr(port_start + 1) : std::string_view();
  const bool port_zero = has_port && !port.empty() && port.find_first_not_of('0') == std::string_view::npos;
  if (code == CURLUE_BAD_PORT_NUMBER || (code == CURLUE_OK && has_port && (port.empty() || port_zero))) {
    return bad("has an invalid port " + single_quoted(has_port ? authority.substr(port_start) : authority));
  }
  if (code == CURLUE_BAD_IPV6) {
    return bad("has an invalid IPv6 address");
  }
  if (code != CURLUE_OK || url_part(parsed.get(), CURLUPART_HOST).value_or("").empty()) {
    return bad("has no valid host");
  }
  const std::string path = url_part(parsed.get(), CURLUPART_PATH).value_or("/");
  if ((path != "/" && !path.empty()) || url_part(parsed.get(), CURLUPART_QUERY) ||
      url_part(parsed.get(), CURLUPART_FRAGMENT)) {
    return bad("must be scheme://host[:port] without a path, query or fragment");
  }
  return std::string(scheme) + "://" + std::string(authority);
}

// The host of a checked endpoint ("[::1]" for IPv6 literals).
std::string endpoint_host(const std::string& endpoint) {
  UrlHandle parsed(curl_url(), &curl_url_cleanup);
  if (!parsed || curl_url_set(parsed.get(), CURLUPART_URL, endpoint.c_str(), 0) != CURLUE_OK) {
    return {};
  }
  return url_part(parsed.get(), CURLUPART_HOST).value_or("");
}

bool is_valid_region(std::string_view region) {
  return !region.empty() && region.size() <= 32 && std::all_of(region.begin(), region.end(), [](char c) {
    return std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '-';
  });
}

struct UrlParameters {
  std::optional<std::string> endpoint;
  std::optional<std::string> region;
  std::optional<bool> path_style;
};

Status apply_parameter(std::string_view url, UrlParameters& parameters, std::string_view name,
                       const std::string& value) {
  const auto duplicate = [&] { return url_error(url, "parameter " + single_quoted(name) + " is given twice"); };
  if (name == "endpoint") {
    if (parameters.endpoint) {
      return duplicate();
    }
    OPCACHE_TRY_ASSIGN(parameters.endpoint, parse_endpoint(url, value));
  } else if (name == "region") {
    if (parameters.region) {
      return duplicate();
    }
    if (!is_valid_region(value)) {
      return url_error(url, "region " + single_quoted(value) + " is not a region name (lowercase letters, digits, '-')");
    }
    parameters.region = value;
  } else if (name == "path_style") {
    if (parameters.path_style) {
      return duplicate();
    }
    auto path_style = base::parse_bool(value);
    if (!path_style) {
      return url_error(url, "path_style " + single_quoted(value) + " " + path_style.error().message());
    }
    parameters.path_style = *path_style;
  } else {
    return url_error(url, "unknown parameter " + single_quoted(name) + " (known: endpoint, region, path_style)");
  }
  return {};
}

Result<UrlParameters> parse_parameters(std::string_view url, std::string_view query) {
  UrlParameters parameters;
  while (!query.empty()) {
    const std::size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (pair.empty()) {
      continue;
    }
    const std::size_t eq = pair.find('=');
    const std::string_view name = pair.substr(0, eq);
    auto value = eq == std::string_view::npos ? std::optional<std::string>("") : base::percent_decode(pair.substr(eq + 1));
    if (!value) {
      return url_error(url, "parameter " + single_quoted(name) + " has a malformed %-escape");
    }
    if (value->empty()) {
      return url_error(url, "parameter " + single_quoted(name) + " has no value");
    }
    OPCACHE_TRY(apply_parameter(url, parameters, name, *value));
  }
  return parameters;
}


}  // namespace

std::string s3_uri_encode(std::string_view text, bool keep_slash) {
  return base::percent_encode(text, keep_slash ? "-._~/" : "-._~");
}

Result<S3Location> parse_s3_url(std::string_view url) {
  if (url.substr(0, k_scheme.size()) != k_scheme) {
    return url_error(url, "must start with s3:// (s3://bucket/prefix?endpoint=...&region=...)");
  }
  if (url.find('#') != std::string_view::npos) {
    return url_error(url, "a fragment ('#') is not allowed");
  }
  std::string_view rest = url.substr(k_scheme.size());
  const std::size_t question = rest.find('?');
  const std::string_view query = question == std::string_view::npos ? std::string_view() : rest.substr(question + 1);
  rest = rest.substr(0, question);
  const std::size_t slash = rest.find('/');
  const std::string_view bucket = rest.substr(0, slash);
  if (bucket.empty()) {
    return url_error(url, "the bucket name is missing (s3://bucket/prefix)");
  }
  if (bucket.find_first_of("@:") != std::string_view::npos) {
    return url_error(url, "bucket " + single_quoted(bucket) +
                              " contains '@' or ':'; give the endpoint with ?endpoint= and credentials through "
                              "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or ~/.aws/credentials");
  }
  if (auto problem = bucket_problem(bucket); !problem.empty()) {
    return url_error(url, "bucket " + single_quoted(bucket) + " is not a valid bucket name: " + problem);
  }
  S3Location location;
  location.bucket = std::string(bucket);
  if (slash != std::string_view::npos) {
    OPCACHE_TRY_ASSIGN(location.prefix, parse_prefix(url, rest.substr(slash + 1)));
  }
  OPCACHE_TRY_ASSIGN(UrlParameters parameters, parse_parameters(url, query));
  location.region = parameters.region.value_or(k_s3_default_region);
  location.endpoint = parameters.endpoint.value_or("https://s3." + location.region + ".amazonaws.com");
  location.path_style =
      parameters.path_style.value_or(parameters.endpoint.has_value() || bucket.find('.') != std::string_view::npos);
  if (!location.path_style) {
    const std::string host = endpoint_host(location.endpoint);
    if (is_ipv4_literal(host) || host.empty() || host.front() == '[') {
      return url_error(url, "virtual-hosted style (path_style=false) needs a DNS name as endpoint, not " +
                                single_quoted(host) + "; use path_style=true");
    }
  }
  return location;
}

}  // namespace opcache::remote
