// POST /v1/entries/fetch (docs/protocol.md "Batch fetch"): many bundles in
// one response, as a bundle stream (remote/bundle_stream.hpp), so that a
// fresh machine pulls a model's kernels in a few round trips however far
// the server is. The response is assembled in memory, at most
// k_fetch_response_bytes of bundles; the keys beyond are answered "later".
#include "base/json_parse.hpp"
#include "base/try.hpp"
#include "remote/bundle_stream.hpp"
#include "server/api.hpp"

namespace opcache::server {

namespace {

using json = nlohmann::json;
using remote::StreamFrame;

const char* const k_body_shape =
    "request body must be {\"keys\": [\"<64 hex>\", ...]} or {\"scenario\": \"FIELD=VALUE,...\", \"op_type\": "
    "\"<op type>\", \"limit\": N} (each of the last three optional)";

// The listing query of a filter body {"scenario", "op_type", "limit"}.
Result<ListQuery> filter_of(const json& body, std::size_t max_keys) {
  ListQuery query;
  query.limit = static_cast<int>(max_keys);
  for (const auto& [name, value] : body.items()) {
    if (name == "scenario" && value.is_string()) {
      OPCACHE_TRY(apply_scenario_filter(value.get<std::string>(), query));
    } else if (name == "op_type" && value.is_string()) {
      query.op_type = value.get<std::string>();
    } else if (name == "limit" && value.is_number_integer() && value.get<std::int64_t>() >= 1 &&
               value.get<std::int64_t>() <= static_cast<std::int64_t>(max_keys)) {
      query.limit = static_cast<int>(value.get<std::int64_t>());
    } else {
      return Error::usage(k_body_shape + std::string("; \"") + name + "\" is unknown or out of range (limit: 1 to " +
                          std::to_string(max_keys) + ")");
    }
  }
  return query;
}

// Appends the `size` bytes of `bundle` to `out`.
Status append_bundle(const StoredBundle& bundle, std::string& out) {
  if (bundle.memory) {
    out += *bundle.memory;
    return {};
  }
  const std::size_t start = out.size();
  out.resize(start + static_cast<std::size_t>(bundle.size));
  OPCACHE_TRY_ASSIGN(auto got, base::read_up_to(bundle.fd.get(), out.data() + start,
                                                static_cast<std::size_t>(bundle.size), "stored bundle"));
  if (got != static_cast<std::size_t>(bundle.size)) {
    return Error::io("a stored bundle is shorter than its entry says");
  }
  return {};
}

// Builds the stream: a frame per key, bundles until the byte budget is spent.
class FetchStream {
 public:
  explicit FetchStream(Storage& storage) : m_storage(storage) { m_out.append(remote::k_bundle_stream_magic); }

  Status add(const std::string& key) {
    if (m_full) {
      return frame(StreamFrame::about(StreamFrame::Status::later, key));
    }
    OPCACHE_TRY_ASSIGN(auto found, m_storage.open(key));
    if (!found) {
      OPCACHE_TRY_ASSIGN(auto tombstone, m_storage.revocation(key));
      ++m_misses;
      m_kernels->push_back({key, false, 0, nullptr});
      if (tombstone) {
        StreamFrame revoked = StreamFrame::about(StreamFrame::Status::revoked, key);
        revoked.reason = tombstone->reason;
        return frame(revoked);
      }
      return frame(StreamFrame::about(StreamFrame::Status::miss, key));
    }
    if (found->size > k_fetch_response_bytes) {
      return frame(StreamFrame::about(StreamFrame::Status::too_large, key));
    }
    if (m_bundle_bytes + found->size > k_fetch_response_bytes) {
      m_full = true;
      return frame(StreamFrame::about(StreamFrame::Status::later, key));
    }
    StreamFrame hit = StreamFrame::about(StreamFrame::Status::hit, key);
    hit.bytes = found->size;
    hit.digest = found->digest;
    hit.signatures = found->signatures;
    OPCACHE_TRY(frame(hit));
    OPCACHE_TRY(append_bundle(*found, m_out));
    m_bundle_bytes += found->size;
    ++m_hits;
    m_kernels->push_back({key, true, found->size, found->facts});
    return {};
  }

  // The stream, closed with its end frame.
  std::string finish() {
    StreamFrame end = StreamFrame::about(StreamFrame::Status::end);
    end.entries = m_frames;
    m_out += remote::encode_frame(end);
    return std::move(m_out);
  }

  std::int64_t hits() const noexcept { return m_hits; }
  std::int64_t misses() const noexcept { return m_misses; }
  /// What each frame told about its kernel, for the usage statistics.
  std::shared_ptr<const std::vector<FetchedKernel>> kernels() const { return m_kernels; }

 private:
  Status frame(const StreamFrame& frame) {
    m_out += remote::encode_frame(frame);
    ++m_frames;
    return {};
  }

  Storage& m_storage;
  std::string m_out;
  std::int64_t m_bundle_bytes = 0;
  std::int64_t m_frames = 0;
  std::int64_t m_hits = 0;
  std::int64_t m_misses = 0;
  bool m_full = false;
  std::shared_ptr<std::vector<FetchedKernel>> m_kernels = std::make_shared<std::vector<FetchedKernel>>();
};

}  // namespace

ApiResponse Api::fetch(const std::string& body) {
  auto parsed = base::parse_json(body, "request body");
  if (!parsed || !parsed->is_object()) {
    return error_response(400, "bad_request", parsed ? k_body_shape : parsed.error().message());
  }
  std::vector<std::string> keys;
  if (auto listed = parsed->find("keys"); listed != parsed->end()) {
    if (parsed->size() != 1) {
      return error_response(400, "bad_request", std::string(k_body_shape) + ": \"keys\" goes alone");
    }
    if (!listed->is_array()) {
      return error_response(400, "bad_request", k_body_shape);
    }
    if (auto refused = read_key_array(*listed, m_config.max_query_keys, "fetch", keys)) {
      return std::move(*refused);
    }
  } else {
    auto query = filter_of(*parsed, m_config.max_query_keys);
    if (!query) {
      return error_response(400, "bad_request", query.error().message());
    }
    auto page = m_storage.list(*query);
    if (!page) {
      return storage_failure(page.error());
    }
    for (const auto& entry : page->entries) {
      keys.push_back(entry.key);
    }
  }
  FetchStream stream(m_storage);
  for (const auto& key : keys) {
    if (auto added = stream.add(key); !added) {
      return storage_failure(added.error());
    }
  }
  m_metrics.record_lookups(stream.hits(), stream.misses());
  ApiResponse response;
  response.content_type = remote::k_bundle_stream_type;
  response.body = stream.finish();
  response.fetched = stream.kernels();
  return response;
}

}  // namespace opcache::server
