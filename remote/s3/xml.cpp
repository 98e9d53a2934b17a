#include "remote/s3/xml.hpp"

#include <array>
#include <cctype>
#include <charconv>
#include <cstdint>

#include "base/try.hpp"
#include "base/utf8.hpp"

namespace opcache::remote {

namespace {

constexpr int k_max_xml_depth = 32;

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


}  // namespace

const XmlElement* XmlElement::child(std::string_view child_name) const {
  for (const auto& element : children) {
    if (element.name == child_name) {
      return &element;
    }
  }
  return nullptr;
}

Result<XmlElement> parse_xml(std::string_view xml) { return XmlReader(xml).parse_document(); }

}  // namespace opcache::remote
