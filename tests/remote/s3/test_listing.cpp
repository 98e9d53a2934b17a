// S3 listings and error documents (remote/s3/listing.hpp over the XML reader
// of remote/s3/xml.hpp): entities, CDATA, pagination, and malformed input.
#include <doctest/doctest.h>

#include <string>
#include <utility>
#include <vector>

#include "remote/s3/listing.hpp"

using opcache::ErrorCode;
using opcache::remote::parse_list_objects_v2;
using opcache::remote::parse_s3_error;
using opcache::remote::S3ListPage;

TEST_CASE("remote::parse_list_objects_v2 decodes entities, CDATA and pagination") {
  const std::string xml =
      "\xEF\xBB\xBF<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!-- listing -->\n"
      "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
      "<Name>bucket</Name><Prefix>p/</Prefix><KeyCount>6</KeyCount><MaxKeys>6</MaxKeys>"
      "<IsTruncated>true</IsTruncated>"
      "<Contents><Key>p/a &amp; b</Key><Size>10</Size><ETag>&quot;abc&quot;</ETag></Contents>"
      "<Contents><Key>p/&lt;x&gt;</Key><Size>0</Size></Contents>"
      "<Contents><Key>p/&#233;t&#xE9;-&#x6838;</Key><Size>9223372036854775807</Size></Contents>"
      "<Contents><Key>p/q&quot;&apos;\"'</Key><Size>1</Size><Owner><ID>x</ID></Owner></Contents>"
      "<Contents><Key><![CDATA[p/raw <&> ]]>tail</Key><Size>2</Size><!-- c --></Contents>"
      "<Contents><Key>p/</Key><Size>0</Size></Contents>"
      "<Contents><s3:Key xmlns:s3='urn:x'>p/ns</s3:Key><Size>3</Size><Empty/></Contents>"
      "<NextContinuationToken>tok+/=</NextContinuationToken>"
      "</ListBucketResult>\n";
  auto page = parse_list_objects_v2(xml, "p/");
  REQUIRE_MESSAGE(page.ok(), page.error().message());
  REQUIRE(page->objects.size() == 6);  // the "p/" folder marker is skipped
  CHECK(page->objects[0].name == "a & b");
  CHECK(page->objects[0].size == 10);
  CHECK(page->objects[0].etag == "abc");
  CHECK(page->objects[1].name == "<x>");
  CHECK(page->objects[2].name == "\xC3\xA9t\xC3\xA9-\xE6\xA0\xB8");
  CHECK(page->objects[2].size == INT64_MAX);
  CHECK(page->objects[3].name == "q\"'\"'");
  CHECK(page->objects[4].name == "raw <&> tail");
  CHECK(page->objects[5].name == "ns");
  CHECK(page->next_continuation_token == "tok+/=");

  auto last = parse_list_objects_v2(
      "<ListBucketResult><IsTruncated>false</IsTruncated><NextContinuationToken>x</NextContinuationToken>"
      "</ListBucketResult>",
      "");
  REQUIRE(last.ok());
  CHECK(last->objects.empty());
  CHECK(last->next_continuation_token.empty());
}

TEST_CASE("remote::parse_list_objects_v2 rejects truncated and malformed responses") {
  const std::string good =
      "<ListBucketResult><IsTruncated>false</IsTruncated>"
      "<Contents><Key>p/a</Key><Size>1</Size></Contents></ListBucketResult>";
  const std::vector<std::pair<std::string, std::string>> table = {
      {"", "no root element"},
      {"   ", "no root element"},
      {good.substr(0, good.size() - 19), "<ListBucketResult> is not closed"},
      {good.substr(0, 35), "<IsTruncated> is not closed"},
      {good.substr(0, 40), "truncated end tag </Is>"},
      {"<ListBucketResult", "truncated"},
      {"<ListBucketResult><IsTruncated>false</IsTruncated></ListBucket", "truncated end tag"},
      {"<ListBucketResult><IsTruncated>false</Truncated></ListBucketResult>", "</Truncated> closes <IsTruncated>"},
      {"<ListBucketResult><IsTruncated>false</IsTruncated><Contents><Key>p/&foo;</Key><Size>1</Size></Contents>"
       "</ListBucketResult>",
       "unknown entity &foo;"},
      {"<ListBucketResult><IsTruncated>false</IsTruncated><Contents><Key>p/&amp</Key></Contents></ListBucketResult>",
       "unterminated entity reference"},
      {"<ListBucketResult><IsTruncated>false</IsTruncated><Contents><Key>p/&#0;</Key></Contents></ListBucketResult>",
       "invalid character reference &#0;"},
      {"<ListBucketResult><IsTruncated>false</IsTruncated><Contents><Key>&#xD800;</Key></Contents>"
       "</ListBucketResult>",
       "invalid character reference"},
      {"<ListBucketResult><IsTruncated>false</IsTruncated><Contents><Key>&#x110000;</Key></Contents>"
       "</ListBucketResult>",
       "invalid character reference"},
      {"<ListBucketResult><IsTruncated>false</IsTruncated><Contents><Key>&#12a;</Key></Contents>"
       "</ListBucketResult>",
       "invalid character reference"},
      {"<!DOCTYPE x [<!ENTITY e \"boom\">]><ListBucketResult/>", "DOCTYPE"},
      {good + "<Extra/>", "content after the root element"},
      {"junk" + good, "text before the root element"},
      {"<ListBucketResult a=\"1></ListBucketResult>", "unterminated attribute value"},
      {"<ListBucketResult><!-- never closed </ListBucketResult>", "unterminated comment"},
      {"<ListBucketResult><![CDATA[x</ListBucketResult>", "unterminated CDATA section"},
      {"<Other><IsTruncated>false</IsTruncated></Other>", "root element is <Other>, not <ListBucketResult>"},
      {"<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>",
       "an S3 error document instead of a listing: AccessDenied: Access Denied"},
      {"<ListBucketResult><Contents><Key>p/a</Key><Size>1</Size></Contents></ListBucketResult>",
       "<IsTruncated> is missing"},
      {"<ListBucketResult><IsTruncated>maybe</IsTruncated></ListBucketResult>", "not true/false"},
      {"<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>", "no <NextContinuationToken>"},
      {"<ListBucketResult><IsTruncated>false</IsTruncated><Contents><Size>1</Size></Contents></ListBucketResult>",
       "a <Contents> has no <Key>"},
      {"<ListBucketResult><IsTruncated>false</IsTruncated><Contents><Key>p/a</Key><Size>-1</Size></Contents>"
       "</ListBucketResult>",
       "key 'p/a' has no valid <Size>"},
      {"<ListBucketResult><IsTruncated>false</IsTruncated><Contents><Key>p/a</Key><Size>12a</Size></Contents>"
       "</ListBucketResult>",
       "has no valid <Size>"},
      {"<ListBucketResult><IsTruncated>false</IsTruncated><Contents><Key>p/a</Key></Contents></ListBucketResult>",
       "has no valid <Size>"},
      {"<ListBucketResult><IsTruncated>false</IsTruncated><Contents><Key>q/a</Key><Size>1</Size></Contents>"
       "</ListBucketResult>",
       "key 'q/a' is outside the listed prefix 'p/'"},
      {std::string(40, ' ') + std::string(100, '<') + "a", "expected an element name"},
  };
  for (const auto& [xml, expected] : table) {
    CAPTURE(xml);
    auto page = parse_list_objects_v2(xml, "p/");
    REQUIRE_FALSE(page.ok());
    CHECK(page.error().code() == ErrorCode::remote);
    CHECK_MESSAGE(page.error().message().find(expected) != std::string::npos, page.error().message());
  }
  std::string deep;
  for (int i = 0; i < 100; ++i) {
    deep += "<a>";
  }
  auto page = parse_list_objects_v2(deep, "");
  REQUIRE_FALSE(page.ok());
  CHECK(page.error().message().find("nested too deeply") != std::string::npos);
}

TEST_CASE("remote::parse_s3_error extracts Code and Message") {
  auto document = parse_s3_error(
      "<?xml version=\"1.0\"?><Error><Code>NoSuchKey</Code><Message>The key &quot;k&quot; does not exist</Message>"
      "<Key>k</Key></Error>");
  REQUIRE(document.has_value());
  CHECK(document->code == "NoSuchKey");
  CHECK(document->message == "The key \"k\" does not exist");
  CHECK_FALSE(parse_s3_error("<ListBucketResult/>").has_value());
  CHECK_FALSE(parse_s3_error("<Error><Code>x</Code>").has_value());
  CHECK_FALSE(parse_s3_error("").has_value());
}

