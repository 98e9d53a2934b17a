#include "remote/s3/credentials.hpp"

#include <filesystem>
#include <optional>

#include "base/file_io.hpp"
#include "base/ini.hpp"
#include "base/try.hpp"

namespace opcache::remote {

namespace {

namespace fs = std::filesystem;
using base::IniSections;

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


}  // namespace

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
  OPCACHE_TRY_ASSIGN(IniSections sections, base::parse_ini_sections(*text, file.string()));
  return credentials_from_profile(file, sections, profile);
}

}  // namespace opcache::remote
