#include "server/miss_table.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "store/key.hpp"

namespace opcache::server {

namespace {

using json = nlohmann::json;

constexpr std::size_t k_top_keys_per_group = 10;

// "" (unknown) is null; else the scenario object.
json scenario_json(const std::string& canonical) {
  json scenario = canonical.empty() ? json(nullptr) : json::parse(canonical, nullptr, false);
  return scenario.is_discarded() ? json(nullptr) : scenario;
}

json optional_text(const std::string& text) { return text.empty() ? json(nullptr) : json(text); }

bool asked_more(const std::pair<const std::string, MissRecord>* a, const std::pair<const std::string, MissRecord>* b) {
  if (a->second.requests != b->second.requests) {
    return a->second.requests > b->second.requests;
  }
  return a->second.last_ms != b->second.last_ms ? a->second.last_ms > b->second.last_ms : a->first < b->first;
}

struct Group {
  std::vector<const std::pair<const std::string, MissRecord>*> keys;
  std::int64_t requests = 0;
  std::set<std::uint64_t> clients;
};

json group_json(const std::pair<std::string, std::string>& name, Group& group) {
  std::sort(group.keys.begin(), group.keys.end(), asked_more);
  json top = json::array();
  for (std::size_t i = 0; i < group.keys.size() && i < k_top_keys_per_group; ++i) {
    const auto& [key, record] = *group.keys[i];
    top.push_back({{"key", key},
                   {"requests", record.requests},
                   {"clients", record.clients.size()},
                   {"last_ms", record.last_ms}});
  }
  return {{"op_type", optional_text(name.first)},
          {"scenario", scenario_json(name.second)},
          {"keys", group.keys.size()},
          {"requests", group.requests},
          {"clients", group.clients.size()},
          {"top_keys", top}};
}

Result<MissRecord> record_from_json(const json& item) {
  MissRecord record;
  auto text = [&](const char* name, std::string& out) {
    auto it = item.find(name);
    if (it != item.end() && !it->is_null()) {
      if (!it->is_string()) {
        return false;
      }
      out = it->get<std::string>();
    }
    return true;
  };
  auto number = [&](const char* name, std::int64_t& out) {
    auto it = item.find(name);
    if (it == item.end() || !it->is_number_integer() || it->get<std::int64_t>() < 0) {
      return false;
    }
    out = it->get<std::int64_t>();
    return true;
  };
  auto clients = item.find("clients");
  if (!text("op_type", record.op_type) || !text("scenario", record.scenario) || !number("requests", record.requests) ||
      !number("last_ms", record.last_ms) || clients == item.end() || !clients->is_array() ||
      clients->size() > k_clients_per_key) {
    return Error::corrupt("a missed key's record is malformed");
  }
  for (const auto& client : *clients) {
    if (!client.is_number_unsigned()) {
      return Error::corrupt("a missed key's client is not an unsigned integer");
    }
    record.clients.push_back(client.get<std::uint64_t>());
  }
  std::sort(record.clients.begin(), record.clients.end());
  return record;
}

}  // namespace

std::uint64_t client_hash(std::string_view token_name, std::string_view address) {
  std::uint64_t hash = 14695981039346656037ull;
  auto mix = [&hash](std::string_view text) {
    for (unsigned char c : text) {
      hash = (hash ^ c) * 1099511628211ull;
    }
  };
  mix(token_name);
  mix(std::string_view("\n", 1));
  mix(address);
  return hash;
}

MissTable::MissTable(std::size_t capacity) : m_capacity(std::max<std::size_t>(capacity, 1)) {}

void MissTable::make_room() {
  auto least = std::min_element(m_records.begin(), m_records.end(), [](const auto& a, const auto& b) {
    return a.second.requests != b.second.requests ? a.second.requests < b.second.requests
                                                  : a.second.last_ms < b.second.last_ms;
  });
  m_records.erase(least);
}

void MissTable::record(const std::string& key, const std::string& op_type, const std::string& scenario,
                       std::uint64_t client, std::int64_t at_ms) {
  auto it = m_records.find(key);
  if (it == m_records.end()) {
    if (m_records.size() >= m_capacity) {
      make_room();
    }
    it = m_records.emplace(key, MissRecord{}).first;
  }
  MissRecord& record = it->second;
  ++record.requests;
  record.last_ms = std::max(record.last_ms, at_ms);
  if (!op_type.empty()) {
    record.op_type = op_type;
  }
  if (!scenario.empty()) {
    record.scenario = scenario;
  }
  auto position = std::lower_bound(record.clients.begin(), record.clients.end(), client);
  if ((position == record.clients.end() || *position != client) && record.clients.size() < k_clients_per_key) {
    record.clients.insert(position, client);
  }
}

void MissTable::forget(const std::string& key) { m_records.erase(key); }

json MissTable::groups_json(std::size_t limit) const {
  std::map<std::pair<std::string, std::string>, Group> groups;
  for (const auto& entry : m_records) {
    Group& group = groups[{entry.second.op_type, entry.second.scenario}];
    group.keys.push_back(&entry);
    group.requests += entry.second.requests;
    group.clients.insert(entry.second.clients.begin(), entry.second.clients.end());
  }
  std::vector<std::pair<const std::pair<std::string, std::string>, Group>*> order;
  for (auto& group : groups) {
    order.push_back(&group);
  }
  // Most requested first; ties by op type and scenario (the map's order).
  std::stable_sort(order.begin(), order.end(),
                   [](const auto* a, const auto* b) { return a->second.requests > b->second.requests; });
  json out = json::array();
  for (std::size_t i = 0; i < order.size() && i < limit; ++i) {
    out.push_back(group_json(order[i]->first, order[i]->second));
  }
  return out;
}

json MissTable::to_json() const {
  json records = json::object();
  for (const auto& [key, record] : m_records) {
    records[key] = {{"op_type", optional_text(record.op_type)},
                    {"scenario", optional_text(record.scenario)},
                    {"requests", record.requests},
                    {"last_ms", record.last_ms},
                    {"clients", record.clients}};
  }
  return records;
}

Status MissTable::from_json(const json& value) {
  if (!value.is_object()) {
    return Error::corrupt("the missed keys are not an object");
  }
  std::unordered_map<std::string, MissRecord> records;
  for (const auto& [key, item] : value.items()) {
    if (!store::check_key(key) || !item.is_object()) {
      return Error::corrupt("missed key \"" + key + "\" is not a cache key with a record");
    }
    auto record = record_from_json(item);
    if (!record) {
      return Error::corrupt(record.error().message() + " (key " + key + ")");
    }
    if (records.size() < m_capacity) {
      records.emplace(key, std::move(*record));
    }
  }
  m_records = std::move(records);
  return {};
}

}  // namespace opcache::server
