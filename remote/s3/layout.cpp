#include "remote/s3/layout.hpp"

#include <vector>

#include "base/percent_coding.hpp"
#include "base/sha256.hpp"

namespace opcache::remote {

namespace {

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (;;) {
    auto end = text.find(separator, start);
    parts.push_back(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) {
      return parts;
    }
    start = end + 1;
  }
}

}  // namespace

std::string s3_component_encode(const std::string& text) {
  std::string out = base::percent_encode(text, "-._");
  // An empty or dot-only component would make an awkward key segment.
  return out.empty() || out == "." || out == ".." ? "%" + out : out;
}

std::string s3_component_decode(const std::string& text) {
  // A lone leading '%' marks an empty or dot-only component.
  if (text == "%" || text == "%." || text == "%..") {
    return text.substr(1);
  }
  return base::percent_decode(text).value_or(text);
}

std::string s3_bundle_name(const std::string& key) { return "v1/bundles/" + key; }

std::string s3_signatures_name(const std::string& key) { return "v1/signatures/" + key; }

std::string s3_tombstone_name(const std::string& key) { return k_s3_revocations_root + key + ".json"; }

std::string s3_exec_manifest_name(const std::string& command_key) {
  return "v1/manifests/" + command_key + ".json";
}

std::string s3_usage_name(const std::string& replica) {
  return k_s3_usage_root + s3_component_encode(replica) + ".json";
}

std::string s3_index_name(const S3IndexFields& fields, const std::string& key) {
  return std::string(k_s3_index_root) + s3_component_encode(fields.device_mode) + "/" +
         s3_component_encode(fields.phase) + "/" + s3_component_encode(fields.toolchain) + "/" +
         s3_component_encode(fields.soc) + "/" + s3_component_encode(fields.op_type) + "/" + key;
}

std::string s3_index_prefix(const S3IndexFields& filter) {
  std::string prefix = k_s3_index_root;
  for (const std::string* field :
       {&filter.device_mode, &filter.phase, &filter.toolchain, &filter.soc, &filter.op_type}) {
    if (field->empty()) {
      break;
    }
    prefix += s3_component_encode(*field) + "/";
  }
  return prefix;
}

std::optional<std::pair<S3IndexFields, std::string>> parse_s3_index_name(const std::string& name) {
  const std::string root = k_s3_index_root;
  if (name.rfind(root, 0) != 0) {
    return std::nullopt;
  }
  auto parts = split(name.substr(root.size()), '/');
  if (parts.size() != 6 || !base::is_sha256_hex(parts[5])) {
    return std::nullopt;
  }
  S3IndexFields fields{s3_component_decode(parts[0]), s3_component_decode(parts[1]), s3_component_decode(parts[2]),
                       s3_component_decode(parts[3]), s3_component_decode(parts[4])};
  return std::make_pair(fields, parts[5]);
}

}  // namespace opcache::remote
