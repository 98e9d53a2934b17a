// Presigned GET URLs (remote/s3/presign.cpp): AWS's own worked example, the
// same URL as botocore's signer (an independent implementation) with a
// session token and a path-style endpoint with a port, the refusals, and a
// GET of a presigned URL that moto answers with the object's bytes.
#include <doctest/doctest.h>

#include <chrono>
#include <string>

#include "remote/curl_handle.hpp"
#include "remote/s3/client.hpp"
#include "remote/s3/presign.hpp"
#include "tests/support/moto.hpp"
#include "tests/support/process.hpp"
#include "tests/support/server.hpp"
#include "tests/support/skip.hpp"

using opcache::ErrorCode;
using opcache::remote::presign_s3_get;
using opcache::remote::S3Credentials;
using opcache::remote::S3Location;

namespace presign_test {

// 2013-05-24T00:00:00Z, the moment of AWS's examples.
std::chrono::system_clock::time_point aws_example_moment() {
  return std::chrono::system_clock::time_point(std::chrono::seconds(1369353600));
}

S3Credentials aws_example_credentials() {
  return S3Credentials{"AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "", "test"};
}

// The value of the query parameter `name` of `url`, or "".
std::string query_value(const std::string& url, const std::string& name) {
  const auto at = url.find(name + "=");
  if (at == std::string::npos) {
    return {};
  }
  const auto start = at + name.size() + 1;
  return url.substr(start,
                    url.find('&', start) == std::string::npos ? std::string::npos : url.find('&', start) - start);
}

}  // namespace presign_test

TEST_CASE("remote::presign_s3_get gives the signature of AWS's worked example (examplebucket, test.txt)") {
  // "Example: presigned URL", Authenticating Requests: Using Query Parameters (AWS Signature Version 4).
  const S3Location location{"https://examplebucket.s3.amazonaws.com", "examplebucket", "", "us-east-1", false};
  auto url = presign_s3_get(location, presign_test::aws_example_credentials(),
                            "https://examplebucket.s3.amazonaws.com/test.txt", std::chrono::seconds(86400),
                            presign_test::aws_example_moment());
  REQUIRE(url.ok());
  CHECK(*url ==
        "https://examplebucket.s3.amazonaws.com/test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256"
        "&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request"
        "&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host"
        "&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404");
  // The secrets of the URL never reach a message.
  const std::string shown = opcache::remote::redact_url(*url);
  CHECK(shown.find("aeeed9bb") == std::string::npos);
  CHECK(shown.find("AKIAIOSFODNN7EXAMPLE") == std::string::npos);
}

TEST_CASE("remote::presign_s3_get signs a session token and refuses bad URLs and expiries") {
  const S3Location location{"http://127.0.0.1:9000", "bucket", "p", "eu-west-1", true};
  S3Credentials credentials = presign_test::aws_example_credentials();
  const std::string object = "http://127.0.0.1:9000/bucket/p/v1/bundles/abc";
  auto plain =
      presign_s3_get(location, credentials, object, std::chrono::seconds(300), presign_test::aws_example_moment());
  credentials.session_token = "FQoGZXIvYXdzE+token/with=signs";
  auto with_token =
      presign_s3_get(location, credentials, object, std::chrono::seconds(300), presign_test::aws_example_moment());
  REQUIRE(plain.ok());
  REQUIRE(with_token.ok());
  CHECK(presign_test::query_value(*with_token, "X-Amz-Security-Token") == "FQoGZXIvYXdzE%2Btoken%2Fwith%3Dsigns");
  CHECK(presign_test::query_value(*plain, "X-Amz-Security-Token").empty());
  CHECK(presign_test::query_value(*plain, "X-Amz-Signature") !=
        presign_test::query_value(*with_token, "X-Amz-Signature"));
  CHECK(presign_test::query_value(*plain, "X-Amz-Credential") ==
        "AKIAIOSFODNN7EXAMPLE%2F20130524%2Feu-west-1%2Fs3%2Faws4_request");

  const auto refused = [&](const std::string& url, long seconds) {
    auto signed_url =
        presign_s3_get(location, credentials, url, std::chrono::seconds(seconds), presign_test::aws_example_moment());
    return !signed_url && signed_url.error().code() == ErrorCode::usage;
  };
  CHECK(refused(object, 0));
  CHECK(refused(object, 7 * 24 * 3600 + 1));
  CHECK_FALSE(refused(object, 7 * 24 * 3600));
  CHECK(refused("ftp://127.0.0.1/bucket/key", 60));
  CHECK(refused("http://127.0.0.1:9000", 60));
  CHECK(refused("http:///bucket/key", 60));
  CHECK(refused(object + "?versionId=1", 60));
}

TEST_CASE("remote::presign_s3_get equals botocore's presigned URL for a path-style endpoint with a session token") {
  // botocore (the AWS SDK for Python, which moto needs) signs the same request
  // at the same moment: a second implementation of the algorithm.
  const std::string script = R"(
import datetime, sys
from unittest import mock
try:
    from botocore.auth import S3SigV4QueryAuth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials
except ImportError:
    print("NO-BOTOCORE"); sys.exit(0)
auth = S3SigV4QueryAuth(Credentials("AKIDEXAMPLE", "secret/key+x", "session+token/1"), "s3", "eu-central-1", expires=300)
request = AWSRequest(method="GET", url="http://127.0.0.1:9000/team-bucket/p/v1/bundles/0a1b")
with mock.patch("botocore.auth.get_current_datetime", return_value=datetime.datetime(2026, 11, 30, 12, 34, 56)):
    auth.add_auth(request)
print(request.url)
)";
  opcache::test::ProcessResult botocore;
  try {
    botocore = opcache::test::run_process({"python3", "-c", script});
  } catch (const std::exception& error) {
    OPCACHE_SKIP_IF(true, std::string("python3 cannot run: ") + error.what());
  }
  OPCACHE_SKIP_IF(botocore.exit_code != 0 || botocore.out.find("NO-BOTOCORE") != std::string::npos,
                  "botocore is not importable by python3: " + botocore.err);
  const std::string expected = botocore.out.substr(0, botocore.out.find('\n'));
  const S3Location location{"http://127.0.0.1:9000", "team-bucket", "p", "eu-central-1", true};
  const S3Credentials credentials{"AKIDEXAMPLE", "secret/key+x", "session+token/1", "test"};
  auto url = presign_s3_get(location, credentials, "http://127.0.0.1:9000/team-bucket/p/v1/bundles/0a1b",
                            std::chrono::seconds(300),
                            std::chrono::system_clock::time_point(std::chrono::seconds(1796042096)));
  REQUIRE(url.ok());
  CHECK(presign_test::query_value(*url, "X-Amz-Signature") == presign_test::query_value(expected, "X-Amz-Signature"));
  CHECK(presign_test::query_value(*url, "X-Amz-Date") == "20261130T123456Z");
  CHECK(presign_test::query_value(expected, "X-Amz-Date") == "20261130T123456Z");
}

TEST_CASE("remote::presign_s3_get: moto answers a GET of the presigned URL, without credentials, with the object") {
  OPCACHE_SKIP_IF(opcache::test::MotoServer::unavailable_reason().has_value(),
                  *opcache::test::MotoServer::unavailable_reason());
  opcache::test::use_moto_test_credentials();
  auto location = opcache::remote::parse_s3_url("s3://opcache-presign/team?endpoint=" +
                                                opcache::test::MotoServer::shared().endpoint());
  REQUIRE(location.ok());
  const S3Credentials credentials{"AKIDOPCACHETEST", "opcache/test+secret", "", "test"};
  opcache::remote::S3Client client(*location, credentials);
  REQUIRE(client.create_bucket_if_missing().ok());
  const std::string body = "bundle bytes \x01\x02 of some kernel";
  REQUIRE(
      client.put_text("v1/bundles/abc", body, opcache::remote::S3WriteCondition::always(), "application/octet-stream")
          .ok());
  auto url = presign_s3_get(*location, credentials, client.object_url("v1/bundles/abc"), std::chrono::seconds(300),
                            std::chrono::system_clock::now());
  REQUIRE(url.ok());
  auto answer = opcache::test::http_request("GET", *url);
  CHECK(answer.status == 200);
  CHECK(answer.body == body);
  // Moto 5 does not check the signature of a query-authenticated request
  // (its authentication reads the Authorization header only), so a refused
  // signature cannot be shown here: the two tests above check the signature.
}
