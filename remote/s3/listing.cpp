#include "remote/s3/listing.hpp"

#include "remote/s3/text.hpp"
#include "remote/s3/xml.hpp"
#include "base/try.hpp"
#include "base/value_parse.hpp"

namespace opcache::remote {

namespace {

Result<S3Object> parse_contents(const XmlElement& contents, std::string_view key_prefix) {
  const XmlElement* key = contents.child("Key");
  const XmlElement* size = contents.child("Size");
  if (key == nullptr || key->text.empty()) {
    return Error::remote("a <Contents> has no <Key>");
  }
  if (key->text.compare(0, key_prefix.size(), key_prefix) != 0) {
    return Error::remote("key " + single_quoted(key->text) + " is outside the listed prefix " + single_quoted(key_prefix));
  }
  const auto bytes = base::parse_integer(size != nullptr ? std::string_view(size->text) : std::string_view(), 0);
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

}  // namespace

Result<S3ListPage> parse_list_objects_v2(std::string_view xml, std::string_view key_prefix) {
  auto root = parse_xml(xml);
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
  auto root = parse_xml(xml);
  if (!root || root->name != "Error") {
    return std::nullopt;
  }
  const XmlElement* code = root->child("Code");
  const XmlElement* message = root->child("Message");
  return S3ErrorDocument{code ? code->text : std::string(), message ? message->text : std::string()};
}

}  // namespace opcache::remote
