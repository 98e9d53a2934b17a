// The client side of a team server's POST /v1/explain (docs/protocol.md
// "Explain"): how the entries it stores differ from a lookup. Implemented by
// the http(s) remote (RemoteStore::explainer()); s3:// and file:// have no
// server to compare for them.
#pragma once

#include <string>

#include "opcache/result.hpp"

namespace opcache::remote {

/// The oldest opcache server that has /v1/explain, for messages.
inline constexpr const char* k_first_explain_revision = "HTTP API v1 revision 5";

/// Asks one server. Thread-safe.
class EntryExplainer {
 public:
  virtual ~EntryExplainer() = default;

  /// POSTs `request` ({"descriptor","scenario","limit"}, JSON text) and
  /// returns the server's answer, checked to be a JSON object. Errors:
  /// `remote` for a server without the route (404 or 405: older than
  /// k_first_explain_revision, said so), 401/403 and other statuses, and
  /// malformed bodies; `remote` or `timeout` for transport failures.
  virtual Result<std::string> explain(const std::string& request) = 0;
};

}  // namespace opcache::remote
