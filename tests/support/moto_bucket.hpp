// An S3 client on a bucket of the shared moto_server, for tests of what a
// server keeps in a bucket (leases, usage counters) without a server.
#pragma once

#include <string>

#include <doctest/doctest.h>

#include "base/environment.hpp"
#include "remote/s3/client.hpp"
#include "remote/s3/credentials.hpp"
#include "remote/s3/url.hpp"
#include "tests/support/moto.hpp"

namespace opcache::test {

/// A client of `bucket` (created when missing) under `prefix` on
/// MotoServer::shared(), with the test credentials (use_moto_test_credentials).
/// REQUIREs that each step works; check MotoServer::unavailable_reason() first.
inline remote::S3Client moto_bucket_client(const std::string& bucket, const std::string& prefix) {
  use_moto_test_credentials();
  auto location = remote::parse_s3_url("s3://" + bucket + "/" + prefix + "?endpoint=" + MotoServer::shared().endpoint());
  REQUIRE(location.ok());
  auto credentials = remote::load_s3_credentials(base::process_environment());
  REQUIRE(credentials.ok());
  remote::S3Client client(*location, *credentials);
  REQUIRE(client.create_bucket_if_missing().ok());
  return client;
}

}  // namespace opcache::test
