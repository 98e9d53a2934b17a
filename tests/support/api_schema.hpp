// The JSON Schemas of the HTTP API (schemas/api/, with references to
// schemas/) applied to real responses, for the server tests.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "tests/support/server.hpp"

namespace opcache::test {

/// The validation errors of `value` against schemas/api/`schema_file`, one
/// per line; empty when valid. Schemas are loaded once per process;
/// thread-safe.
std::string schema_errors(const std::string& schema_file, const nlohmann::json& value);

/// Parses a JSON response body, CHECKs its content type and that it is valid
/// against schemas/api/`schema_file`, and returns it (REQUIREs that it parses).
nlohmann::json checked_json(const HttpResponse& response, const std::string& schema_file);

}  // namespace opcache::test
