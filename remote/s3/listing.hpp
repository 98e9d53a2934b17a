// What S3 answers about objects: HEAD and listing results, ListObjectsV2
// responses and S3 <Error> documents.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "opcache/result.hpp"

namespace opcache::remote {

/// An object as reported by HEAD or a listing.
struct S3Object {
  std::string name;  ///< relative to the location's prefix
  std::int64_t size = 0;
  std::string etag;                                ///< without the surrounding quotes
  std::map<std::string, std::string> metadata;     ///< x-amz-meta-* (lowercase names); empty from listings
};

/// One page of a listing.
struct S3ListPage {
  std::vector<S3Object> objects;        ///< in key order
  std::string next_continuation_token;  ///< empty when the listing is complete
};

/// Parses a ListObjectsV2 response body. Every <Contents><Key> must start with
/// `key_prefix`, which is stripped from the returned names. Decodes the five
/// predefined XML entities and numeric character references; accepts comments,
/// CDATA and an XML declaration; ignores unknown elements. Returns a `remote`
/// error for anything malformed: truncated or mismatched tags, bad entities,
/// a root other than <ListBucketResult> (an S3 <Error> document is reported
/// with its Code and Message), a <Contents> without <Key> or with a bad <Size>,
/// or IsTruncated=true without a NextContinuationToken.
Result<S3ListPage> parse_list_objects_v2(std::string_view xml, std::string_view key_prefix);

/// The Code and Message of an S3 <Error> document; nullopt when `xml` is not one.
struct S3ErrorDocument {
  std::string code;
  std::string message;
};
std::optional<S3ErrorDocument> parse_s3_error(std::string_view xml);

}  // namespace opcache::remote
