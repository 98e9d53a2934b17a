// S3 credentials, found the way the AWS tools find them.
#pragma once

#include <string>

#include "opcache/result.hpp"
#include "store/scenario.hpp"

namespace opcache::remote {

/// An access key pair, an optional session token and where they came from.
struct S3Credentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;  ///< empty unless temporary credentials
  std::string source;         ///< for messages: "environment" or "<file> [profile]"; never a secret
};

/// Finds credentials the way the AWS tools do, first match wins:
///  1. AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN);
///  2. the shared credentials file (AWS_SHARED_CREDENTIALS_FILE, else
///     $HOME/.aws/credentials), section AWS_PROFILE (else "default"), keys
///     aws_access_key_id, aws_secret_access_key, aws_session_token.
/// A `usage` error when only one of the two variables is set, when the file
/// is not INI, when the profile is missing or incomplete, and when nothing is
/// found (the message lists what was looked at). An unreadable file is `io`.
/// Thread-safe if `env` is.
Result<S3Credentials> load_s3_credentials(const base::EnvLookup& env);

}  // namespace opcache::remote
