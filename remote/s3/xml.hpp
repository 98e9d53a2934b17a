// A small XML reader for S3 responses: elements, character data, the five
// predefined entities, numeric references, comments, CDATA and processing
// instructions. Attributes are skipped; DOCTYPEs are refused.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "opcache/result.hpp"

namespace opcache::remote {

/// One element of a parsed document.
struct XmlElement {
  std::string name;  ///< local name: the namespace prefix, if any, is dropped
  std::string text;  ///< character data directly inside this element
  std::vector<XmlElement> children;

  /// The first child named `child_name`, or nullptr. Owned by this element.
  const XmlElement* child(std::string_view child_name) const;
};

/// The root element of `xml`. A `remote` error "malformed XML at byte N: …"
/// for truncated or mismatched tags, bad entities, declarations, content
/// outside the root, or nesting deeper than 32. Pure; thread-safe.
Result<XmlElement> parse_xml(std::string_view xml);

}  // namespace opcache::remote
