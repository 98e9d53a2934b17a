#include "server/usage_tables.hpp"

#include <algorithm>
#include <utility>

#include "store/key.hpp"

namespace opcache::server {

namespace usage_tables_impl {

using json = nlohmann::json;

Result<TokenActivity> token_from_json(const json& item) {
  TokenActivity activity;
  if (!item.is_object()) {
    return Error::corrupt("token activity is not an object");
  }
  auto counts = counts_from_json(item);
  if (!counts) {
    return counts.error();
  }
  activity.counts = *counts;
  for (auto [name, field] : {std::pair{"bytes_in", &activity.bytes_in}, std::pair{"bytes_out", &activity.bytes_out},
                             std::pair{"last_seen_ms", &activity.last_seen_ms}}) {
    auto it = item.find(name);
    if (it == item.end() || !it->is_number_integer() || it->get<std::int64_t>() < 0) {
      return Error::corrupt(std::string("token activity: \"") + name + "\" is not a non-negative integer");
    }
    *field = it->get<std::int64_t>();
  }
  return activity;
}

// "uploads": {"<key>": at_ms, ...}, absent in documents before revision 9.
Result<std::deque<UploadedKey>> uploads_from_json(const json& value) {
  std::deque<UploadedKey> uploads;
  if (!value.is_object()) {
    return Error::corrupt("\"uploads\" is not an object");
  }
  for (const auto& [key, at] : value.items()) {
    if (!store::check_key(key) || !at.is_number_integer() || at.get<std::int64_t>() < 0) {
      return Error::corrupt("\"uploads\" holds \"" + key.substr(0, 80) + "\", not a cache key with a time");
    }
    uploads.push_back({key, at.get<std::int64_t>()});
  }
  std::stable_sort(uploads.begin(), uploads.end(), [](const auto& a, const auto& b) { return a.at_ms < b.at_ms; });
  while (uploads.size() > k_usage_recent_uploads) {
    uploads.pop_front();
  }
  return uploads;
}

// One missed key's record as merge_missed adds them up.
struct MergedMiss {
  json op_type;   // null when unknown
  json scenario;  // null when unknown
  std::int64_t named_at_ms = -1;  // last_ms of the record op_type and scenario came from
  std::int64_t requests = 0;
  std::int64_t last_ms = 0;
  std::vector<std::uint64_t> clients;  // sorted, at most k_clients_per_key
};

void add_miss(MergedMiss& merged, const json& record) {
  const auto last_ms = record.value("last_ms", std::int64_t{0});
  merged.requests += record.value("requests", std::int64_t{0});
  merged.last_ms = std::max(merged.last_ms, last_ms);
  const json& op_type = record.contains("op_type") ? record["op_type"] : json(nullptr);
  const json& scenario = record.contains("scenario") ? record["scenario"] : json(nullptr);
  if ((!op_type.is_null() || !scenario.is_null()) && last_ms > merged.named_at_ms) {
    merged.op_type = op_type;
    merged.scenario = scenario;
    merged.named_at_ms = last_ms;
  }
  std::vector<std::uint64_t> clients = merged.clients;
  if (auto it = record.find("clients"); it != record.end() && it->is_array()) {
    for (const auto& client : *it) {
      if (client.is_number_unsigned()) {
        clients.push_back(client.get<std::uint64_t>());
      }
    }
  }
  std::sort(clients.begin(), clients.end());
  clients.erase(std::unique(clients.begin(), clients.end()), clients.end());
  if (clients.size() > k_clients_per_key) {
    clients.resize(k_clients_per_key);
  }
  merged.clients = std::move(clients);
}

}  // namespace usage_tables_impl

using usage_tables_impl::json;

void UsageTables::remember_upload(std::string key, std::int64_t at_ms) {
  uploads.push_back({std::move(key), at_ms});
  while (uploads.size() > k_usage_recent_uploads) {
    uploads.pop_front();
  }
}

json token_activity_json(const std::string& name, const TokenActivity& activity) {
  return {{"name", name},
          {"requests", activity.counts.requests},
          {"lookups", activity.counts.lookups},
          {"hits", activity.counts.hits},
          {"misses", activity.counts.misses},
          {"uploads", activity.counts.uploads},
          {"bytes_in", activity.bytes_in},
          {"bytes_out", activity.bytes_out},
          {"last_seen_ms", activity.last_seen_ms}};
}

json usage_document(const UsageTables& tables, std::int64_t saved_ms) {
  json tokens = json::object();
  for (const auto& [name, activity] : tables.tokens) {
    tokens[name] = token_activity_json(name, activity);
  }
  json uploads = json::object();
  for (const auto& upload : tables.uploads) {
    uploads[upload.key] = upload.at_ms;  // the later of two uploads of a key wins: they are in order
  }
  return {{"format", k_usage_document_format},
          {"version", k_usage_document_version},
          {"saved_ms", saved_ms},
          {"since_ms", tables.since_ms},
          {"total", counts_to_json(tables.total)},
          {"minutes", tables.minutes.to_json()},
          {"hours", tables.hours.to_json()},
          {"tokens", tokens},
          {"misses", tables.misses.to_json()},
          {"uploads", uploads}};
}

std::int64_t usage_document_saved_ms(const json& value) {
  auto it = value.is_object() ? value.find("saved_ms") : value.end();
  return it != value.end() && it->is_number_integer() ? it->get<std::int64_t>() : 0;
}

Result<UsageTables> parse_usage_document(const json& value) {
  if (!value.is_object() || value.value("format", "") != k_usage_document_format) {
    return Error::corrupt(std::string("not an \"") + k_usage_document_format + "\" document");
  }
  if (value.value("version", 0) != k_usage_document_version) {
    return Error::corrupt("format version " + value.value("version", json(nullptr)).dump() + ", this server reads " +
                          std::to_string(k_usage_document_version));
  }
  UsageTables tables;
  auto since = value.find("since_ms");
  if (since != value.end() && (!since->is_number_integer() || since->get<std::int64_t>() < 0)) {
    return Error::corrupt("\"since_ms\" is not a non-negative integer");
  }
  tables.since_ms = since != value.end() ? since->get<std::int64_t>() : 0;
  auto total = counts_from_json(value.value("total", json::object()));
  if (!total) {
    return total.error();
  }
  tables.total = *total;
  for (auto [series, field] : {std::pair{&tables.minutes, "minutes"}, std::pair{&tables.hours, "hours"}}) {
    if (auto loaded = series->from_json(value.value(field, json::array())); !loaded) {
      return loaded.error();
    }
  }
  if (auto loaded = tables.misses.from_json(value.value("misses", json::object())); !loaded) {
    return loaded.error();
  }
  const json token_items = value.value("tokens", json::object());
  if (!token_items.is_object()) {
    return Error::corrupt("\"tokens\" is not an object");
  }
  for (const auto& [name, item] : token_items.items()) {
    auto activity = usage_tables_impl::token_from_json(item);
    if (!activity) {
      return activity.error();
    }
    if (tables.tokens.size() < k_usage_token_names) {
      tables.tokens.emplace(name, *activity);
    }
  }
  auto uploads = usage_tables_impl::uploads_from_json(value.value("uploads", json::object()));
  if (!uploads) {
    return uploads.error();
  }
  tables.uploads = std::move(*uploads);
  return tables;
}

void add_token_activities(TokenActivities& into, const TokenActivities& from) {
  for (const auto& [name, activity] : from) {
    auto it = into.find(name);
    if (it == into.end()) {
      if (into.size() < k_usage_token_names) {
        into.emplace(name, activity);
      }
      continue;
    }
    TokenActivity& sum = it->second;
    sum.counts += activity.counts;
    sum.bytes_in += activity.bytes_in;
    sum.bytes_out += activity.bytes_out;
    sum.last_seen_ms = std::max(sum.last_seen_ms, activity.last_seen_ms);
  }
}

void add_upload_times(UploadTimes& times, const UsageTables& tables) {
  for (const auto& upload : tables.uploads) {
    auto [it, fresh] = times.emplace(upload.key, upload.at_ms);
    if (!fresh) {
      it->second = std::max(it->second, upload.at_ms);
    }
  }
}

json merge_missed(const std::vector<const json*>& tables, const UploadTimes& uploaded, std::size_t capacity) {
  std::map<std::string, usage_tables_impl::MergedMiss> merged;
  for (const json* records : tables) {
    if (records == nullptr || !records->is_object()) {
      continue;
    }
    for (const auto& [key, record] : records->items()) {
      if (!record.is_object()) {
        continue;
      }
      auto upload = uploaded.find(key);
      if (upload != uploaded.end() && upload->second >= record.value("last_ms", std::int64_t{0})) {
        continue;
      }
      usage_tables_impl::add_miss(merged[key], record);
    }
  }
  std::vector<const std::pair<const std::string, usage_tables_impl::MergedMiss>*> order;
  for (const auto& entry : merged) {
    order.push_back(&entry);
  }
  std::stable_sort(order.begin(), order.end(), [](const auto* a, const auto* b) {
    return a->second.requests != b->second.requests ? a->second.requests > b->second.requests
                                                    : a->second.last_ms > b->second.last_ms;
  });
  json out = json::object();
  for (std::size_t i = 0; i < order.size() && i < capacity; ++i) {
    const auto& [key, miss] = *order[i];
    out[key] = {{"op_type", miss.op_type},
                {"scenario", miss.scenario},
                {"requests", miss.requests},
                {"last_ms", miss.last_ms},
                {"clients", miss.clients}};
  }
  return out;
}

void add_tables(UsageTables& sum, const UsageTables& other) {
  if (other.since_ms > 0) {
    sum.since_ms = sum.since_ms > 0 ? std::min(sum.since_ms, other.since_ms) : other.since_ms;
  }
  sum.total += other.total;
  sum.minutes.add_series(other.minutes);
  sum.hours.add_series(other.hours);
  add_token_activities(sum.tokens, other.tokens);
  const json mine = sum.misses.to_json();
  const json theirs = other.misses.to_json();
  MissTable misses(sum.misses.capacity());
  // merge_missed's records are well-formed: from_json cannot refuse them.
  (void)misses.from_json(merge_missed({&mine, &theirs}, {}, misses.capacity()));
  sum.misses = std::move(misses);
  std::deque<UploadedKey> uploads;
  std::merge(sum.uploads.begin(), sum.uploads.end(), other.uploads.begin(), other.uploads.end(),
             std::back_inserter(uploads), [](const auto& a, const auto& b) { return a.at_ms < b.at_ms; });
  while (uploads.size() > k_usage_recent_uploads) {
    uploads.pop_front();
  }
  sum.uploads = std::move(uploads);
}

}  // namespace opcache::server
