// S3 client: URL parsing, credentials, a small XML reader for S3 responses,
// and the request engine (signing, retries, streaming) over remote/curl_handle.
//
// SigV4 and libcurl 7.88 (Debian 12) — what libcurl does and what we add:
//  * CURLOPT_AWS_SIGV4 "aws:amz:<region>:s3" computes the Authorization header
//    over the method, the URL path exactly as given, the query string exactly
//    as given, host, x-amz-date and every header we pass in CURLOPT_HTTPHEADER.
//  * 7.88 neither encodes the path nor sorts the query: we send keys already
//    URI-encoded per SigV4 (s3_uri_encode) with CURLOPT_PATH_AS_IS (so "./"
//    in keys survives), and build query strings already sorted and encoded.
//  * 7.88 does not add x-amz-content-sha256 by itself and, for an upload from
//    a read callback, would sign the hash of an empty payload. When the request
//    carries an x-amz-content-sha256 header, libcurl signs that value as the
//    payload hash. So every request sends it: the SHA-256 of the empty string
//    for requests without a body, the real SHA-256 for small in-memory bodies,
//    and UNSIGNED-PAYLOAD for streamed file uploads (allowed by S3 for
//    single-part PUTs; the transport (TLS) protects the body).
//  * A header line "Name:" (which tells libcurl to drop a header) would be
//    signed but not sent, breaking the signature; we never pass one.
#include "remote/s3/client.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ini.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <random>
#include <thread>

#include "opcache/version.hpp"
#include "remote/curl_handle.hpp"
#include "base/file_io.hpp"
#include "base/sha256.hpp"
#include "base/try.hpp"
#include "base/utf8.hpp"

namespace opcache::remote {

namespace {

namespace fs = std::filesystem;

constexpr std::string_view k_scheme = "s3://";
constexpr const char* k_what = "S3";
constexpr const char* k_default_region = "us-east-1";
constexpr std::string_view k_empty_payload_sha256 =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
constexpr std::string_view k_unsigned_payload = "UNSIGNED-PAYLOAD";
constexpr std::string_view k_metadata_header_prefix = "x-amz-meta-";
constexpr std::size_t k_max_key_bytes = 1024;
constexpr std::size_t k_max_metadata_bytes = 2048;
constexpr std::int64_t k_max_single_put_bytes = std::int64_t{5} << 30;
constexpr std::size_t k_max_error_body_bytes = 64 * 1024;
constexpr std::size_t k_max_list_body_bytes = 32 * 1024 * 1024;
constexpr long k_max_retry_after_s = 5;
constexpr long k_backoff_base_ms = 100;
constexpr long k_backoff_cap_ms = 2000;
constexpr int k_max_xml_depth = 32;
constexpr int k_max_list_keys = 1000;

// ---------------------------------------------------------------------------
// Text helpers

bool is_unreserved(unsigned char c) { return std::isalnum(c) != 0 || c == '-' || c == '_' || c == '.' || c == '~'; }

int hex_value(char c) {
  if (c >= '0' && c <= '9') {
    return c - '0';
  }
  if (c >= 'a' && c <= 'f') {
    return c - 'a' + 10;
  }
  if (c >= 'A' && c <= 'F') {
    return c - 'A' + 10;
  }
  return -1;
}

// Decodes %XX escapes; nullopt on a malformed escape.
std::optional<std::string> percent_decode(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    if (i + 2 >= text.size()) {
      return std::nullopt;
    }
    const int high = hex_value(text[i + 1]);
    const int low = hex_value(text[i + 2]);
    if (high < 0 || low < 0) {
      return std::nullopt;
    }
    out += static_cast<char>(high * 16 + low);
    i += 2;
  }
  return out;
}

bool has_control_character(std::string_view text) {
  return std::any_of(text.begin(), text.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u < 0x20 || u == 0x7F;
  });
}

std::string single_quoted(std::string_view text) { return "'" + std::string(text) + "'"; }

std::optional<std::int64_t> parse_non_negative(std::string_view text) {
  std::int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size() || value < 0) {
    return std::nullopt;
  }
  return value;
}

std::string strip_quotes(std::string_view etag) {
  if (etag.size() >= 2 && etag.front() == '"' && etag.back() == '"') {
    etag = etag.substr(1, etag.size() - 2);
  }
  return std::string(etag);
}

// ---------------------------------------------------------------------------
// s3:// URLs

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
  auto decoded = percent_decode(raw);
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
  if (prefix.size() > k_max_key_bytes / 2) {
    return url_error(url, "the prefix is longer than " + std::to_string(k_max_key_bytes / 2) + " bytes");
  }
  return prefix;
}

// Checks "http(s)://host[:port][/]" and returns it without the trailing slash.
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
  if (authority.find_first_of("/?#") != std::string_view::npos) {
    return bad("must be scheme://host[:port] without a path, query or fragment");
  }
  std::string_view host = authority;
  std::string_view port;
  if (!host.empty() && host.front() == '[') {
    const std::size_t close = host.find(']');
    if (close == std::string_view::npos) {
      return bad("has an unterminated IPv6 address");
    }
    port = host.substr(close + 1);
    host = host.substr(0, close + 1);
  } else if (const std::size_t colon = host.rfind(':'); colon != std::string_view::npos) {
    port = host.substr(colon);
    host = host.substr(0, colon);
  }
  if (host.empty() || host.find_first_of(" \t\r\n") != std::string_view::npos) {
    return bad("has no valid host");
  }
  if (!port.empty()) {
    const auto number = port.size() > 1 ? parse_non_negative(port.substr(1)) : std::nullopt;
    if (port.front() != ':' || !number || *number < 1 || *number > 65535) {
      return bad("has an invalid port " + single_quoted(port));
    }
  }
  return std::string(scheme) + "://" + std::string(authority);
}

std::string_view endpoint_host(std::string_view endpoint) {
  std::string_view authority = endpoint.substr(endpoint.find("://") + 3);
  if (!authority.empty() && authority.front() == '[') {
    return authority.substr(0, authority.find(']') + 1);
  }
  return authority.substr(0, authority.rfind(':'));
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
    if (value != "true" && value != "false" && value != "1" && value != "0") {
      return url_error(url, "path_style must be true or false, not " + single_quoted(value));
    }
    parameters.path_style = value == "true" || value == "1";
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
    auto value = eq == std::string_view::npos ? std::optional<std::string>("") : percent_decode(pair.substr(eq + 1));
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

// ---------------------------------------------------------------------------
// Credentials

// An INI file as section -> key -> value.
using IniSections = std::map<std::string, std::map<std::string, std::string>>;

std::optional<std::string> non_empty(const base::EnvLookup& env, const char* name) {
  auto value = env(name);
  if (value && value->empty()) {
    return std::nullopt;
  }
  return value;
}

Result<std::optional<S3Credentials>> credentials_from_environment(const base::EnvLookup& env) {
  auto key = non_empty(env, "AWS_ACCESS_KEY_ID");
  auto secret = non_empty(env, "AWS_SECRET_ACCESS_KEY");
  if (!key && !secret) {
    return std::optional<S3Credentials>();
  }
  if (!key || !secret) {
    return Error::usage(std::string(key ? "AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not"
                                        : "AWS_SECRET_ACCESS_KEY is set but AWS_ACCESS_KEY_ID is not") +
                        "; set both, or unset both to use the shared credentials file");
  }
  S3Credentials credentials{*key, *secret, non_empty(env, "AWS_SESSION_TOKEN").value_or(""), "environment"};
  return std::optional<S3Credentials>(std::move(credentials));
}

Result<IniSections> parse_credentials_file(const fs::path& path, const std::string& text) {
  IniSections sections;
  auto handler = [](void* user, const char* section, const char* name, const char* value) -> int {
    (*static_cast<IniSections*>(user))[section][name] = value;
    return 1;
  };
  const int line = ini_parse_string(text.c_str(), handler, &sections);
  if (line != 0) {
    return Error::usage(path.string() + ": line " + std::to_string(line) + " is not INI syntax (key = value)");
  }
  return sections;
}

Result<S3Credentials> credentials_from_profile(const fs::path& path, const IniSections& sections,
                                               const std::string& profile) {
  const std::string source = path.string() + " [" + profile + "]";
  const auto section = sections.find(profile);
  if (section == sections.end()) {
    return Error::usage("AWS credentials file " + path.string() + " has no profile [" + profile +
                        "]; add it or choose another with AWS_PROFILE");
  }
  const auto value = [&](const char* name) {
    const auto it = section->second.find(name);
    return it == section->second.end() ? std::string() : it->second;
  };
  S3Credentials credentials{value("aws_access_key_id"), value("aws_secret_access_key"), value("aws_session_token"),
                            source};
  if (credentials.access_key_id.empty() || credentials.secret_access_key.empty()) {
    return Error::usage(source + " lacks aws_access_key_id or aws_secret_access_key");
  }
  return credentials;
}

// ---------------------------------------------------------------------------
// A small XML reader for S3 responses: elements, character data, the five
// predefined entities, numeric references, comments, CDATA and processing
// instructions. Attributes are skipped; DOCTYPEs are refused.

struct XmlElement {
  std::string name;  // local name: the namespace prefix, if any, is dropped
  std::string text;  // character data directly inside this element
  std::vector<XmlElement> children;

  const XmlElement* child(std::string_view child_name) const {
    for (const auto& element : children) {
      if (element.name == child_name) {
        return &element;
      }
    }
    return nullptr;
  }
};

class XmlReader {
 public:
  explicit XmlReader(std::string_view xml) : m_xml(xml) {}

  Result<XmlElement> parse_document() {
    if (starts_with("\xEF\xBB\xBF")) {
      m_pos += 3;
    }
    OPCACHE_TRY(skip_misc());
    if (starts_with("<!")) {
      return error("DOCTYPE and other declarations are not accepted");
    }
    if (m_pos >= m_xml.size()) {
      return error("no root element (empty or truncated document)");
    }
    if (m_xml[m_pos] != '<') {
      return error("text before the root element");
    }
    OPCACHE_TRY_ASSIGN(XmlElement root, parse_element(0));
    OPCACHE_TRY(skip_misc());
    if (m_pos != m_xml.size()) {
      return error("content after the root element");
    }
    return root;
  }

 private:
  bool starts_with(std::string_view text) const { return m_xml.substr(m_pos, text.size()) == text; }

  Error error(const std::string& what) const {
    return Error::remote("malformed XML at byte " + std::to_string(m_pos) + ": " + what);
  }

  static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

  void skip_spaces() {
    while (m_pos < m_xml.size() && is_space(m_xml[m_pos])) {
      ++m_pos;
    }
  }

  // Moves past `terminator`, which must occur at or after m_pos.
  Status skip_past(std::string_view terminator, const char* what) {
    const std::size_t end = m_xml.find(terminator, m_pos);
    if (end == std::string_view::npos) {
      return error(std::string("unterminated ") + what);
    }
    m_pos = end + terminator.size();
    return {};
  }

  // Whitespace, comments and processing instructions around the root element.
  Status skip_misc() {
    while (true) {
      skip_spaces();
      if (starts_with("<?")) {
        OPCACHE_TRY(skip_past("?>", "processing instruction"));
      } else if (starts_with("<!--")) {
        OPCACHE_TRY(skip_past("-->", "comment"));
      } else {
        return {};
      }
    }
  }

  static bool is_name_char(char c) {
    const auto u = static_cast<unsigned char>(c);
    return std::isalnum(u) != 0 || c == '_' || c == '-' || c == '.' || c == ':' || u >= 0x80;
  }

  Result<std::string> parse_name() {
    const std::size_t start = m_pos;
    while (m_pos < m_xml.size() && is_name_char(m_xml[m_pos])) {
      ++m_pos;
    }
    if (m_pos == start) {
      return error(m_pos >= m_xml.size() ? "truncated tag" : "expected an element name");
    }
    const char first = m_xml[start];
    if (std::isdigit(static_cast<unsigned char>(first)) || first == '-' || first == '.') {
      return error("invalid element name");
    }
    return std::string(m_xml.substr(start, m_pos - start));
  }

  // Skips the attributes of a start tag and its closing '>' or '/>'.
  Result<bool> skip_attributes(const std::string& name) {
    while (true) {
      skip_spaces();
      if (m_pos >= m_xml.size()) {
        return error("truncated start tag <" + name + ">");
      }
      if (m_xml[m_pos] == '>') {
        ++m_pos;
        return false;
      }
      if (starts_with("/>")) {
        m_pos += 2;
        return true;
      }
      OPCACHE_TRY(parse_name());
      skip_spaces();
      if (m_pos >= m_xml.size() || m_xml[m_pos] != '=') {
        return error("expected '=' after an attribute name in <" + name + ">");
      }
      ++m_pos;
      skip_spaces();
      if (m_pos >= m_xml.size() || (m_xml[m_pos] != '"' && m_xml[m_pos] != '\'')) {
        return error("expected a quoted attribute value in <" + name + ">");
      }
      const char quote = m_xml[m_pos++];
      const std::size_t end = m_xml.find(quote, m_pos);
      if (end == std::string_view::npos || m_xml.substr(m_pos, end - m_pos).find('<') != std::string_view::npos) {
        return error("unterminated attribute value in <" + name + ">");
      }
      m_pos = end + 1;
    }
  }

  static std::string local_name(const std::string& name) {
    const std::size_t colon = name.rfind(':');
    return colon == std::string::npos ? name : name.substr(colon + 1);
  }

  Result<XmlElement> parse_element(int depth) {
    if (depth > k_max_xml_depth) {
      return error("elements nested too deeply");
    }
    ++m_pos;  // '<'
    OPCACHE_TRY_ASSIGN(std::string name, parse_name());
    OPCACHE_TRY_ASSIGN(bool self_closing, skip_attributes(name));
    XmlElement element{local_name(name), {}, {}};
    if (!self_closing) {
      OPCACHE_TRY(parse_content(element, name, depth));
    }
    return element;
  }

  Status parse_content(XmlElement& element, const std::string& name, int depth) {
    while (true) {
      const std::size_t lt = m_xml.find('<', m_pos);
      OPCACHE_TRY(append_text(element.text, m_xml.substr(m_pos, lt - m_pos)));
      if (lt == std::string_view::npos) {
        m_pos = m_xml.size();
        return error("truncated: <" + name + "> is not closed");
      }
      m_pos = lt;
      if (starts_with("</")) {
        return parse_end_tag(name);
      }
      if (starts_with("<!--")) {
        OPCACHE_TRY(skip_past("-->", "comment"));
      } else if (starts_with("<![CDATA[")) {
        const std::size_t start = m_pos + 9;
        OPCACHE_TRY(skip_past("]]>", "CDATA section"));
        element.text.append(m_xml.substr(start, m_pos - 3 - start));
      } else if (starts_with("<?")) {
        OPCACHE_TRY(skip_past("?>", "processing instruction"));
      } else if (starts_with("<!")) {
        return error("unexpected declaration inside <" + name + ">");
      } else {
        OPCACHE_TRY_ASSIGN(XmlElement child, parse_element(depth + 1));
        element.children.push_back(std::move(child));
      }
    }
  }

  Status parse_end_tag(const std::string& name) {
    m_pos += 2;
    OPCACHE_TRY_ASSIGN(std::string closing, parse_name());
    skip_spaces();
    if (m_pos >= m_xml.size() || m_xml[m_pos] != '>') {
      return error("truncated end tag </" + closing + ">");
    }
    if (closing != name) {
      return error("</" + closing + "> closes <" + name + ">");
    }
    ++m_pos;
    return {};
  }

  // Appends character data, decoding entity and character references.
  Status append_text(std::string& out, std::string_view raw) {
    for (std::size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] == '>' && i >= 2 && raw.substr(i - 2, 3) == "]]>") {
        return error("']]>' in character data");
      }
      if (raw[i] != '&') {
        out += raw[i];
        continue;
      }
      const std::size_t semicolon = raw.find(';', i);
      if (semicolon == std::string_view::npos || semicolon - i > 12) {
        return error("unterminated entity reference");
      }
      OPCACHE_TRY(append_entity(out, raw.substr(i + 1, semicolon - i - 1)));
      i = semicolon;
    }
    return {};
  }

  Status append_entity(std::string& out, std::string_view entity) {
    static constexpr std::array<std::pair<std::string_view, char>, 5> k_predefined = {
        {{"amp", '&'}, {"lt", '<'}, {"gt", '>'}, {"quot", '"'}, {"apos", '\''}}};
    for (const auto& [name, character] : k_predefined) {
      if (entity == name) {
        out += character;
        return {};
      }
    }
    if (entity.empty() || entity.front() != '#') {
      return error("unknown entity &" + std::string(entity) + ";");
    }
    const bool hex = entity.size() > 1 && entity[1] == 'x';
    const std::string_view digits = entity.substr(hex ? 2 : 1);
    std::uint32_t code_point = 0;
    const auto [end, failure] = std::from_chars(digits.data(), digits.data() + digits.size(), code_point, hex ? 16 : 10);
    const bool is_xml_char = code_point == 0x9 || code_point == 0xA || code_point == 0xD ||
                             (code_point >= 0x20 && code_point <= 0xD7FF) ||
                             (code_point >= 0xE000 && code_point <= 0xFFFD) ||
                             (code_point >= 0x10000 && code_point <= 0x10FFFF);
    if (digits.empty() || failure != std::errc() || end != digits.data() + digits.size() || !is_xml_char) {
      return error("invalid character reference &" + std::string(entity) + ";");
    }
    base::append_utf8(out, code_point);
    return {};
  }

  std::string_view m_xml;
  std::size_t m_pos = 0;
};

Result<S3Object> parse_contents(const XmlElement& contents, std::string_view key_prefix) {
  const XmlElement* key = contents.child("Key");
  const XmlElement* size = contents.child("Size");
  if (key == nullptr || key->text.empty()) {
    return Error::remote("a <Contents> has no <Key>");
  }
  if (key->text.compare(0, key_prefix.size(), key_prefix) != 0) {
    return Error::remote("key " + single_quoted(key->text) + " is outside the listed prefix " + single_quoted(key_prefix));
  }
  const auto bytes = size == nullptr ? std::nullopt : parse_non_negative(size->text);
  if (!bytes) {
    return Error::remote("key " + single_quoted(key->text) + " has no valid <Size>");
  }
  const XmlElement* etag = contents.child("ETag");
  return S3Object{key->text.substr(key_prefix.size()), *bytes, etag ? strip_quotes(etag->text) : std::string(), {}};
}

Result<S3ListPage> list_page_from(const XmlElement& root, std::string_view key_prefix) {
  if (root.name == "Error") {
    const XmlElement* code = root.child("Code");
    const XmlElement* message = root.child("Message");
    return Error::remote("an S3 error document instead of a listing: " + (code ? code->text : std::string("?")) +
                         ": " + (message ? message->text : std::string()));
  }
  if (root.name != "ListBucketResult") {
    return Error::remote("root element is <" + root.name + ">, not <ListBucketResult>");
  }
  const XmlElement* truncated = root.child("IsTruncated");
  if (truncated == nullptr || (truncated->text != "true" && truncated->text != "false")) {
    return Error::remote("<IsTruncated> is missing or not true/false");
  }
  S3ListPage page;
  for (const auto& element : root.children) {
    if (element.name != "Contents") {
      continue;
    }
    OPCACHE_TRY_ASSIGN(S3Object object, parse_contents(element, key_prefix));
    if (!object.name.empty()) {  // the prefix itself: a "folder" marker, not one of our objects
      page.objects.push_back(std::move(object));
    }
  }
  if (truncated->text == "true") {
    const XmlElement* token = root.child("NextContinuationToken");
    if (token == nullptr || token->text.empty()) {
      return Error::remote("<IsTruncated> is true but there is no <NextContinuationToken>");
    }
    page.next_continuation_token = token->text;
  }
  return page;
}

// ---------------------------------------------------------------------------
// Request bodies and response sinks

// The body of an upload: a file streamed with pread, or a small string.
class BodySource {
 public:
  static BodySource from_memory(std::string_view data) { return BodySource(data); }

  static Result<BodySource> from_file(const fs::path& path) {
    OPCACHE_TRY_ASSIGN(base::FileDescriptor fd, base::open_for_reading(path));
    struct stat info {};
    if (::fstat(fd.get(), &info) != 0) {
      return base::errno_error("cannot stat", path, errno);
    }
    if (!S_ISREG(info.st_mode)) {
      return Error::usage("cannot upload " + path.string() + ": not a regular file");
    }
    return BodySource(std::move(fd), path, static_cast<std::int64_t>(info.st_size));
  }

  std::int64_t size() const noexcept { return m_size; }
  void seek(std::int64_t offset) noexcept { m_offset = offset; }

  Result<std::size_t> read(char* buffer, std::size_t capacity) {
    const auto wanted = static_cast<std::size_t>(std::min<std::int64_t>(static_cast<std::int64_t>(capacity),
                                                                        m_size - m_offset));
    if (wanted == 0) {
      return std::size_t{0};
    }
    if (!m_fd.valid()) {
      std::copy_n(m_memory.data() + m_offset, wanted, buffer);
      m_offset += static_cast<std::int64_t>(wanted);
      return wanted;
    }
    ssize_t got = -1;
    do {
      got = ::pread(m_fd.get(), buffer, wanted, m_offset);
    } while (got < 0 && errno == EINTR);
    if (got < 0) {
      return base::errno_error("cannot read", m_path, errno);
    }
    if (got == 0) {
      return Error::io("file " + m_path.string() + " shrank while it was being uploaded");
    }
    m_offset += got;
    return static_cast<std::size_t>(got);
  }

  // After the upload: the file must still have the size that was announced.
  Status check_unchanged() const {
    struct stat info {};
    if (m_fd.valid() && (::fstat(m_fd.get(), &info) != 0 || info.st_size != m_size)) {
      return Error::io("file " + m_path.string() + " changed size while it was being uploaded");
    }
    return {};
  }

 private:
  explicit BodySource(std::string_view memory) : m_memory(memory), m_size(static_cast<std::int64_t>(memory.size())) {}
  BodySource(base::FileDescriptor fd, fs::path path, std::int64_t size)
      : m_fd(std::move(fd)), m_path(std::move(path)), m_size(size) {}

  std::string_view m_memory;
  base::FileDescriptor m_fd;
  fs::path m_path;
  std::int64_t m_size = 0;
  std::int64_t m_offset = 0;
};

// Receives the body of a successful GET into the caller's descriptor.
class DownloadSink {
 public:
  static Result<DownloadSink> open(int fd, std::int64_t max_bytes) {
    struct stat info {};
    if (fd < 0 || ::fstat(fd, &info) != 0) {
      return Error::usage("S3 download target is not an open file descriptor (fd " + std::to_string(fd) + ")");
    }
    // Where the body starts: the current offset, or the end for O_APPEND
    // (writes go there whatever the offset). Only regular files can be rewound.
    off_t start = -1;
    if (S_ISREG(info.st_mode)) {
      const int flags = ::fcntl(fd, F_GETFL);
      start = (flags >= 0 && (flags & O_APPEND) != 0) ? info.st_size : ::lseek(fd, 0, SEEK_CUR);
    }
    return DownloadSink(fd, max_bytes, start);
  }

  Status write(CURL* handle, const char* data, std::size_t size) {
    if (m_written == 0) {
      curl_off_t announced = -1;
      if (curl_easy_getinfo(handle, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &announced) == CURLE_OK &&
          announced > m_max_bytes) {
        return too_large(announced);
      }
    }
    if (m_written + static_cast<std::int64_t>(size) > m_max_bytes) {
      return too_large(m_written + static_cast<std::int64_t>(size));
    }
    OPCACHE_TRY(base::write_all(m_fd, data, size, description()));
    m_written += static_cast<std::int64_t>(size);
    return {};
  }

  // Prepares a new attempt; fails when bytes already written cannot be undone.
  Status restart() {
    if (m_written == 0) {
      return {};
    }
    if (m_start < 0 || ::ftruncate(m_fd, m_start) != 0 || ::lseek(m_fd, m_start, SEEK_SET) != m_start) {
      return Error::remote("cannot retry: part of the body was already written to " + description());
    }
    m_written = 0;
    return {};
  }

 private:
  DownloadSink(int fd, std::int64_t max_bytes, off_t start) : m_fd(fd), m_max_bytes(max_bytes), m_start(start) {}

  std::string description() const { return "fd " + std::to_string(m_fd); }

  Error too_large(std::int64_t size) const {
    return Error::remote("the object is larger than the limit of " + std::to_string(m_max_bytes) + " bytes (" +
                         (m_written == 0 ? "announced " : "at least ") + std::to_string(size) + " bytes)");
  }

  int m_fd;
  std::int64_t m_max_bytes;
  off_t m_start;
  std::int64_t m_written = 0;
};

// One request and its response, possibly attempted several times.
struct Exchange {
  const char* method = "GET";
  std::string url;
  std::vector<std::string> headers;  // besides the ones every request gets
  std::string_view payload_hash = k_empty_payload_sha256;
  BodySource* body = nullptr;
  DownloadSink* sink = nullptr;  // receives a 2xx body; other bodies go to `response_body`
  std::size_t memory_limit = k_max_error_body_bytes;

  CURL* handle = nullptr;  // during an attempt
  int attempts = 0;
  long status = 0;
  ResponseHeaders response_headers;
  std::string response_body;
  std::optional<Error> local_error;  // set by a callback: not retried

  std::string describe() const { return std::string(k_what) + " " + method + " " + redact_url(url); }
};

std::size_t on_body(char* data, std::size_t size, std::size_t count, void* user) {
  auto& exchange = *static_cast<Exchange*>(user);
  const std::size_t bytes = size * count;
  long status = 0;
  curl_easy_getinfo(exchange.handle, CURLINFO_RESPONSE_CODE, &status);
  if (exchange.sink != nullptr && status >= 200 && status <= 299) {
    if (auto written = exchange.sink->write(exchange.handle, data, bytes); !written) {
      exchange.local_error = written.error();
      return 0;
    }
    return bytes;
  }
  if (exchange.response_body.size() + bytes > exchange.memory_limit) {
    exchange.local_error = Error::remote("the response body (HTTP " + std::to_string(status) +
                                         ") is larger than " + std::to_string(exchange.memory_limit) + " bytes");
    return 0;
  }
  exchange.response_body.append(data, bytes);
  return bytes;
}

std::size_t on_read(char* buffer, std::size_t size, std::size_t count, void* user) {
  auto& exchange = *static_cast<Exchange*>(user);
  auto got = exchange.body->read(buffer, size * count);
  if (!got) {
    exchange.local_error = got.error();
    return CURL_READFUNC_ABORT;
  }
  return *got;
}

int on_seek(void* user, curl_off_t offset, int origin) {
  auto& exchange = *static_cast<Exchange*>(user);
  if (origin != SEEK_SET || offset < 0 || offset > exchange.body->size()) {
    return CURL_SEEKFUNC_CANTSEEK;
  }
  exchange.body->seek(offset);
  return CURL_SEEKFUNC_OK;
}

long backoff_ms(int attempt) {
  thread_local std::mt19937_64 random(std::random_device{}());
  const long ceiling = std::min(k_backoff_cap_ms, k_backoff_base_ms << std::min(attempt - 1, 10));
  return std::uniform_int_distribution<long>(ceiling / 2, ceiling)(random);
}

std::string attempts_suffix(int attempts) {
  return attempts > 1 ? " (after " + std::to_string(attempts) + " attempts)" : std::string();
}

// S3 error codes that mean "these credentials were not accepted", whatever
// the status (InvalidToken and ExpiredToken come with 400).
bool is_credential_error(std::string_view code) {
  static constexpr std::array<std::string_view, 7> k_codes = {
      "AccessDenied",          "InvalidAccessKeyId", "SignatureDoesNotMatch",       "InvalidToken",
      "ExpiredToken",          "TokenRefreshRequired", "AuthorizationHeaderMalformed"};
  return std::find(k_codes.begin(), k_codes.end(), code) != k_codes.end();
}

Error with_suffix(const Error& error, const std::string& suffix) { return {error.code(), error.message() + suffix}; }

// Empty when `name` can name an object, else why not.
std::string name_problem(std::string_view name) {
  if (name.empty()) {
    return "is empty";
  }
  if (name.size() > k_max_key_bytes) {
    return "is longer than " + std::to_string(k_max_key_bytes) + " bytes";
  }
  if (!base::is_valid_utf8(name)) {
    return "is not valid UTF-8";
  }
  if (has_control_character(name)) {
    return "contains a control character";
  }
  return {};
}

Status check_name(std::string_view name, const char* role = "object name") {
  if (auto problem = name_problem(name); !problem.empty()) {
    return Error::usage(std::string("S3 ") + role + " " + single_quoted(name) + " " + problem);
  }
  return {};
}

Status check_metadata(const std::map<std::string, std::string>& metadata) {
  std::size_t total = 0;
  for (const auto& [name, value] : metadata) {
    const bool good_name = !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
      return std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) ||
             c == '-' || c == '_';
    });
    if (!good_name) {
      return Error::usage("S3 metadata name " + single_quoted(name) + " must be lowercase letters, digits, '-' or '_'");
    }
    const bool good_value = std::all_of(value.begin(), value.end(), [](char c) { return c >= 0x20 && c <= 0x7E; }) &&
                            (value.empty() || (value.front() != ' ' && value.back() != ' '));
    if (!good_value) {
      return Error::usage("S3 metadata value of " + single_quoted(name) +
                          " must be printable ASCII without leading or trailing blanks");
    }
    total += name.size() + value.size();
  }
  if (total > k_max_metadata_bytes) {
    return Error::usage("S3 metadata is " + std::to_string(total) + " bytes; the limit is " +
                        std::to_string(k_max_metadata_bytes));
  }
  return {};
}

}  // namespace

// ---------------------------------------------------------------------------
// Public helpers

std::string s3_uri_encode(std::string_view text, bool keep_slash) {
  static constexpr char k_hex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (is_unreserved(u) || (keep_slash && c == '/')) {
      out += c;
    } else {
      out += '%';
      out += k_hex[u >> 4];
      out += k_hex[u & 0xF];
    }
  }
  return out;
}

Result<S3ListPage> parse_list_objects_v2(std::string_view xml, std::string_view key_prefix) {
  auto root = XmlReader(xml).parse_document();
  if (!root) {
    return root.error().with_context("malformed ListObjectsV2 response");
  }
  auto page = list_page_from(*root, key_prefix);
  if (!page) {
    return page.error().with_context("unexpected ListObjectsV2 response");
  }
  return page;
}

std::optional<S3ErrorDocument> parse_s3_error(std::string_view xml) {
  auto root = XmlReader(xml).parse_document();
  if (!root || root->name != "Error") {
    return std::nullopt;
  }
  const XmlElement* code = root->child("Code");
  const XmlElement* message = root->child("Message");
  return S3ErrorDocument{code ? code->text : std::string(), message ? message->text : std::string()};
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
  location.region = parameters.region.value_or(k_default_region);
  location.endpoint = parameters.endpoint.value_or("https://s3." + location.region + ".amazonaws.com");
  location.path_style =
      parameters.path_style.value_or(parameters.endpoint.has_value() || bucket.find('.') != std::string_view::npos);
  if (!location.path_style) {
    const std::string_view host = endpoint_host(location.endpoint);
    if (is_ipv4_literal(host) || host.front() == '[') {
      return url_error(url, "virtual-hosted style (path_style=false) needs a DNS name as endpoint, not " +
                                single_quoted(host) + "; use path_style=true");
    }
  }
  return location;
}

Result<S3Credentials> load_s3_credentials(const base::EnvLookup& env) {
  OPCACHE_TRY_ASSIGN(auto from_environment, credentials_from_environment(env));
  if (from_environment) {
    return std::move(*from_environment);
  }
  fs::path file;
  if (auto configured = non_empty(env, "AWS_SHARED_CREDENTIALS_FILE")) {
    file = *configured;
  } else if (auto home = non_empty(env, "HOME")) {
    file = fs::path(*home) / ".aws" / "credentials";
  } else {
    return Error::usage(
        "no S3 credentials: AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY are not set, and neither "
        "AWS_SHARED_CREDENTIALS_FILE nor HOME is set to locate a credentials file");
  }
  const std::string profile = non_empty(env, "AWS_PROFILE").value_or("default");
  auto text = base::read_file(file);
  if (!text) {
    if (text.error().code() != ErrorCode::not_found) {
      return text.error();
    }
    return Error::usage("no S3 credentials: AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY are not set and " +
                        file.string() + " (profile " + profile +
                        ") does not exist; set the variables or create the file");
  }
  OPCACHE_TRY_ASSIGN(IniSections sections, parse_credentials_file(file, *text));
  return credentials_from_profile(file, sections, profile);
}

// ---------------------------------------------------------------------------
// The client

class S3Client::Impl {
 public:
  Impl(S3Location location, S3Credentials credentials, S3Options options)
      : m_location(std::move(location)),
        m_credentials(std::move(credentials)),
        m_options(options),
        m_signing("aws:amz:" + m_location.region + ":s3") {
    while (!m_location.endpoint.empty() && m_location.endpoint.back() == '/') {
      m_location.endpoint.pop_back();
    }
    m_key_prefix = m_location.prefix.empty() ? std::string() : m_location.prefix + "/";
    if (m_location.path_style) {
      m_bucket_url = m_location.endpoint + "/" + m_location.bucket;
    } else {
      const std::size_t authority = m_location.endpoint.find("://") + 3;
      m_bucket_url = m_location.endpoint.substr(0, authority) + m_location.bucket + "." +
                     m_location.endpoint.substr(authority);
    }
  }

  const S3Location& location() const { return m_location; }

  Result<std::optional<S3Object>> head(const std::string& name) {
    OPCACHE_TRY(check_name(name));
    Exchange exchange = make_exchange("HEAD", object_url(name));
    OPCACHE_TRY(execute(exchange));
    if (exchange.status == 404) {
      return std::optional<S3Object>();
    }
    if (exchange.status != 200) {
      return status_error(exchange);
    }
    OPCACHE_TRY_ASSIGN(S3Object object, object_from_headers(name, exchange));
    return std::optional<S3Object>(std::move(object));
  }

  Result<bool> get_to_fd(const std::string& name, int fd, std::int64_t max_bytes) {
    OPCACHE_TRY(check_name(name));
    if (max_bytes < 0) {
      return Error::usage("S3 GET: max_bytes must not be negative");
    }
    OPCACHE_TRY_ASSIGN(DownloadSink sink, DownloadSink::open(fd, max_bytes));
    Exchange exchange = make_exchange("GET", object_url(name));
    exchange.sink = &sink;
    OPCACHE_TRY(execute(exchange));
    if (exchange.status == 404 && error_code_of(exchange) != "NoSuchBucket") {
      return false;
    }
    if (exchange.status != 200) {
      return status_error(exchange);
    }
    return true;
  }

  Status put_from_file(const std::string& name, const fs::path& file,
                       const std::map<std::string, std::string>& metadata, const std::string& content_type) {
    OPCACHE_TRY(check_name(name));
    OPCACHE_TRY(check_metadata(metadata));
    OPCACHE_TRY_ASSIGN(BodySource body, BodySource::from_file(file));
    if (body.size() > k_max_single_put_bytes) {
      return Error::usage("cannot upload " + file.string() + ": larger than the 5 GiB limit of a single S3 PUT");
    }
    Exchange exchange = make_exchange("PUT", object_url(name));
    exchange.body = &body;
    exchange.payload_hash = k_unsigned_payload;
    exchange.headers.push_back("Content-Type: " + content_type);
    for (const auto& [key, value] : metadata) {
      exchange.headers.push_back(std::string(k_metadata_header_prefix) + key + ": " + value);
    }
    OPCACHE_TRY(execute(exchange));
    if (exchange.status != 200) {
      return status_error(exchange);
    }
    return body.check_unchanged();
  }

  Result<bool> remove(const std::string& name) {
    OPCACHE_TRY_ASSIGN(auto existing, head(name));
    if (!existing) {
      return false;
    }
    Exchange exchange = make_exchange("DELETE", object_url(name));
    OPCACHE_TRY(execute(exchange));
    if (exchange.status == 404 && error_code_of(exchange) != "NoSuchBucket") {
      return false;
    }
    if (exchange.status != 204 && exchange.status != 200) {
      return status_error(exchange);
    }
    return true;
  }

  Result<S3ListPage> list(const std::string& name_prefix, const std::string& start_after,
                          const std::string& continuation_token, int max_keys) {
    if (max_keys < 1 || max_keys > k_max_list_keys) {
      return Error::usage("S3 list: max_keys must be 1 to 1000, not " + std::to_string(max_keys));
    }
    if (!name_prefix.empty()) {
      OPCACHE_TRY(check_name(name_prefix, "name prefix"));
    }
    if (!start_after.empty()) {
      OPCACHE_TRY(check_name(start_after, "start-after name"));
    }
    std::vector<std::pair<std::string, std::string>> query = {{"list-type", "2"},
                                                              {"max-keys", std::to_string(max_keys)}};
    if (!continuation_token.empty()) {
      query.emplace_back("continuation-token", continuation_token);
    }
    if (!m_key_prefix.empty() || !name_prefix.empty()) {
      query.emplace_back("prefix", m_key_prefix + name_prefix);
    }
    if (!start_after.empty()) {
      query.emplace_back("start-after", m_key_prefix + start_after);
    }
    Exchange exchange = make_exchange("GET", bucket_url() + "?" + canonical_query(std::move(query)));
    exchange.memory_limit = k_max_list_body_bytes;
    OPCACHE_TRY(execute(exchange));
    if (exchange.status != 200) {
      return status_error(exchange);
    }
    auto page = parse_list_objects_v2(exchange.response_body, m_key_prefix);
    if (!page) {
      return page.error().with_context(exchange.describe());
    }
    return page;
  }

  Status create_bucket_if_missing() {
    Exchange probe = make_exchange("HEAD", bucket_url());
    OPCACHE_TRY(execute(probe));
    if (probe.status == 200) {
      return {};
    }
    if (probe.status != 404) {
      return status_error(probe);
    }
    const std::string configuration =
        m_location.region == k_default_region
            ? std::string()
            : "<CreateBucketConfiguration xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><LocationConstraint>" +
                  m_location.region + "</LocationConstraint></CreateBucketConfiguration>";
    const std::string configuration_hash = base::sha256_hex(configuration);
    BodySource body = BodySource::from_memory(configuration);
    Exchange create = make_exchange("PUT", bucket_url());
    create.body = &body;
    create.payload_hash = configuration_hash;
    OPCACHE_TRY(execute(create));
    if (create.status == 200 || (create.status == 409 && error_code_of(create) == "BucketAlreadyOwnedByYou")) {
      return {};
    }
    return status_error(create);
  }

 private:
  std::string object_url(const std::string& name) const {
    return m_bucket_url + "/" + s3_uri_encode(m_key_prefix + name, true);
  }

  std::string bucket_url() const { return m_location.path_style ? m_bucket_url : m_bucket_url + "/"; }

  // SigV4 wants the query sorted by name with every name and value encoded;
  // libcurl 7.88 signs the query exactly as given.
  static std::string canonical_query(std::vector<std::pair<std::string, std::string>> parameters) {
    std::sort(parameters.begin(), parameters.end());
    std::string out;
    for (const auto& [name, value] : parameters) {
      out += (out.empty() ? "" : "&") + s3_uri_encode(name, false) + "=" + s3_uri_encode(value, false);
    }
    return out;
  }

  static Exchange make_exchange(const char* method, std::string url) {
    Exchange exchange;
    exchange.method = method;
    exchange.url = std::move(url);
    return exchange;
  }

  static std::string error_code_of(const Exchange& exchange) {
    auto document = parse_s3_error(exchange.response_body);
    return document ? document->code : std::string();
  }

  Result<S3Object> object_from_headers(const std::string& name, const Exchange& exchange) const {
    const auto length = exchange.response_headers.get("content-length");
    const auto size = length ? parse_non_negative(*length) : std::nullopt;
    if (!size) {
      return Error::remote(exchange.describe() + ": the response has no valid Content-Length");
    }
    S3Object object{name, *size, strip_quotes(exchange.response_headers.get("etag").value_or("")), {}};
    for (const auto& [header, value] : exchange.response_headers.all()) {
      if (header.size() > k_metadata_header_prefix.size() && header.starts_with(k_metadata_header_prefix)) {
        object.metadata[header.substr(k_metadata_header_prefix.size())] = value;
      }
    }
    return object;
  }

  Error status_error(const Exchange& exchange) const {
    std::string detail;
    std::string code;
    if (auto document = parse_s3_error(exchange.response_body)) {
      code = document->code;
      detail = document->code + (document->message.empty() ? "" : ": " + document->message);
    }
    if (exchange.status == 403 || is_credential_error(code)) {
      detail = "the credentials from " + m_credentials.source + " were refused" +
               (detail.empty() ? std::string() : " (" + detail + ")") +
               "; check the access key, secret key, session token, region and bucket permissions";
    } else if (exchange.status == 400 && detail.empty() && std::string_view(exchange.method) == "HEAD") {
      detail = "a HEAD response carries no error document; a wrong region or an invalid session token are "
               "common causes";
    } else if (auto region = exchange.response_headers.get("x-amz-bucket-region");
               region && *region != m_location.region) {
      detail += (detail.empty() ? "" : "; ") + std::string("the bucket is in region ") + *region +
                " (the URL says " + m_location.region + ")";
    }
    return with_suffix(http_status_error(k_what, exchange.method, exchange.url, exchange.status, detail),
                       attempts_suffix(exchange.attempts));
  }

  Result<HeaderList> request_headers(const Exchange& exchange) const {
    HeaderList headers;
    OPCACHE_TRY(append_header(headers, "x-amz-content-sha256: " + std::string(exchange.payload_hash)));
    if (!m_credentials.session_token.empty()) {
      OPCACHE_TRY(append_header(headers, "x-amz-security-token: " + m_credentials.session_token));
    }
    for (const auto& line : exchange.headers) {
      OPCACHE_TRY(append_header(headers, line));
    }
    return headers;
  }

  Status configure(CURL* handle, Exchange& exchange, const HeaderList& headers, char* error_buffer) const {
    curl_easy_setopt(handle, CURLOPT_URL, exchange.url.c_str());
    curl_easy_setopt(handle, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(handle, CURLOPT_PATH_AS_IS, 1L);
    curl_easy_setopt(handle, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(handle, CURLOPT_CONNECTTIMEOUT_MS, m_options.connect_timeout_ms);
    curl_easy_setopt(handle, CURLOPT_TIMEOUT_MS, m_options.timeout_ms);
    curl_easy_setopt(handle, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(handle, CURLOPT_ERRORBUFFER, error_buffer);
    curl_easy_setopt(handle, CURLOPT_USERAGENT, m_user_agent.c_str());
    curl_easy_setopt(handle, CURLOPT_USERNAME, m_credentials.access_key_id.c_str());
    curl_easy_setopt(handle, CURLOPT_PASSWORD, m_credentials.secret_access_key.c_str());
    if (curl_easy_setopt(handle, CURLOPT_AWS_SIGV4, m_signing.c_str()) != CURLE_OK) {
      return Error::internal("this libcurl cannot sign requests with AWS SigV4 (CURLOPT_AWS_SIGV4 needs 7.75+)");
    }
    curl_easy_setopt(handle, CURLOPT_HTTPHEADER, headers.get());
    exchange.response_headers.install(handle);
    curl_easy_setopt(handle, CURLOPT_WRITEFUNCTION, &on_body);
    curl_easy_setopt(handle, CURLOPT_WRITEDATA, &exchange);
    if (std::string_view(exchange.method) == "HEAD") {
      curl_easy_setopt(handle, CURLOPT_NOBODY, 1L);
    } else if (std::string_view(exchange.method) == "DELETE") {
      curl_easy_setopt(handle, CURLOPT_CUSTOMREQUEST, "DELETE");
    }
    if (exchange.body != nullptr) {
      curl_easy_setopt(handle, CURLOPT_UPLOAD, 1L);
      curl_easy_setopt(handle, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(exchange.body->size()));
      curl_easy_setopt(handle, CURLOPT_READFUNCTION, &on_read);
      curl_easy_setopt(handle, CURLOPT_READDATA, &exchange);
      curl_easy_setopt(handle, CURLOPT_SEEKFUNCTION, &on_seek);
      curl_easy_setopt(handle, CURLOPT_SEEKDATA, &exchange);
    }
    return {};
  }

  // Resets the exchange's response and rewinds its body and sink for a new attempt.
  static Status reset_for_attempt(Exchange& exchange) {
    exchange.status = 0;
    exchange.response_headers.clear();
    exchange.response_body.clear();
    if (exchange.body != nullptr) {
      exchange.body->seek(0);
    }
    return exchange.sink != nullptr ? exchange.sink->restart() : Status();
  }

  // One attempt; the libcurl outcome, with the status in `exchange.status`.
  Result<CURLcode> attempt(Exchange& exchange, const HeaderList& headers, std::string& error_text) const {
    OPCACHE_TRY_ASSIGN(EasyHandlePool::Lease lease, m_pool.acquire());
    std::array<char, CURL_ERROR_SIZE> error_buffer{};
    OPCACHE_TRY(configure(lease.get(), exchange, headers, error_buffer.data()));
    exchange.handle = lease.get();
    const CURLcode code = curl_easy_perform(lease.get());
    exchange.handle = nullptr;
    curl_easy_getinfo(lease.get(), CURLINFO_RESPONSE_CODE, &exchange.status);
    error_text = error_buffer.data();
    return code;
  }

  // How long to wait before attempt `attempts + 1` after a transient HTTP
  // status; nullopt when the server asks for a longer pause than we accept.
  static std::optional<long> status_delay_ms(const Exchange& exchange) {
    long delay = backoff_ms(exchange.attempts);
    if (auto header = exchange.response_headers.get("retry-after")) {
      const auto seconds = parse_retry_after(*header);
      if (!seconds || *seconds > k_max_retry_after_s) {
        return std::nullopt;
      }
      delay = std::max(delay, *seconds * 1000);
    }
    return delay;
  }

  // Performs the exchange with retries. Success means an HTTP response arrived
  // (any status: callers interpret it); errors are transport or local failures.
  Status execute(Exchange& exchange) const {
    OPCACHE_TRY_ASSIGN(HeaderList headers, request_headers(exchange));
    const int max_attempts = 1 + std::max(0, m_options.retries);
    while (true) {
      if (exchange.attempts > 0) {
        if (auto reset = reset_for_attempt(exchange); !reset) {
          return reset.error().with_context(exchange.describe());
        }
      }
      ++exchange.attempts;
      std::string error_text;
      OPCACHE_TRY_ASSIGN(CURLcode code, attempt(exchange, headers, error_text));
      if (exchange.local_error) {
        return exchange.local_error->with_context(exchange.describe());
      }
      const bool last = exchange.attempts >= max_attempts;
      std::optional<long> delay;
      if (code != CURLE_OK) {
        if (last || !is_transient(code) || (code == CURLE_OPERATION_TIMEDOUT && !m_options.retry_timeouts)) {
          return with_suffix(transfer_error(k_what, exchange.method, exchange.url, code, error_text),
                             attempts_suffix(exchange.attempts));
        }
        delay = backoff_ms(exchange.attempts);
      } else if (is_transient_status(exchange.status) && !last) {
        delay = status_delay_ms(exchange);
      }
      if (!delay) {
        return {};
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(*delay));
    }
  }

  S3Location m_location;
  S3Credentials m_credentials;
  S3Options m_options;
  std::string m_signing;
  std::string m_key_prefix;
  std::string m_bucket_url;
  std::string m_user_agent = std::string("opcache/") + k_version_string;
  mutable EasyHandlePool m_pool;
};

S3Client::S3Client(S3Location location, S3Credentials credentials, S3Options options)
    : m_impl(std::make_unique<Impl>(std::move(location), std::move(credentials), options)) {}

S3Client::~S3Client() = default;
S3Client::S3Client(S3Client&&) noexcept = default;
S3Client& S3Client::operator=(S3Client&&) noexcept = default;

const S3Location& S3Client::location() const { return m_impl->location(); }

Result<std::optional<S3Object>> S3Client::head(const std::string& name) { return m_impl->head(name); }

Result<bool> S3Client::get_to_fd(const std::string& name, int fd, std::int64_t max_bytes) {
  return m_impl->get_to_fd(name, fd, max_bytes);
}

Status S3Client::put_from_file(const std::string& name, const std::filesystem::path& file,
                               const std::map<std::string, std::string>& metadata, const std::string& content_type) {
  return m_impl->put_from_file(name, file, metadata, content_type);
}

Result<bool> S3Client::remove(const std::string& name) { return m_impl->remove(name); }

Result<S3ListPage> S3Client::list(const std::string& name_prefix, const std::string& start_after,
                                  const std::string& continuation_token, int max_keys) {
  return m_impl->list(name_prefix, start_after, continuation_token, max_keys);
}

Status S3Client::create_bucket_if_missing() { return m_impl->create_bucket_if_missing(); }

}  // namespace opcache::remote
