#include "server/usage_series.hpp"

namespace opcache::server {

namespace {

using json = nlohmann::json;

// The counters by their JSON names, so that to_json and from_json cannot
// drift apart.
constexpr std::pair<const char*, std::int64_t UsageCounts::*> k_fields[] = {
    {"requests", &UsageCounts::requests},
    {"lookups", &UsageCounts::lookups},
    {"hits", &UsageCounts::hits},
    {"misses", &UsageCounts::misses},
    {"bytes_served", &UsageCounts::bytes_served},
    {"uploads", &UsageCounts::uploads},
    {"bytes_uploaded", &UsageCounts::bytes_uploaded},
    {"compile_ms_saved", &UsageCounts::compile_ms_saved},
};

void add_named(HitsByName& hits, const std::string& name, std::int64_t count) {
  auto it = hits.find(name);
  if (it != hits.end()) {
    it->second += count;
  } else if (hits.size() < k_named_per_bucket) {
    hits.emplace(name, count);
  }
}

Result<HitsByName> named_from_json(const json& value, const char* what) {
  HitsByName hits;
  if (!value.is_object()) {
    return Error::corrupt(std::string("usage bucket: \"") + what + "\" is not an object");
  }
  for (const auto& [name, count] : value.items()) {
    if (!count.is_number_integer() || count.get<std::int64_t>() < 0 || hits.size() >= k_named_per_bucket) {
      return Error::corrupt(std::string("usage bucket: \"") + what + "\" holds a bad count");
    }
    hits.emplace(name, count.get<std::int64_t>());
  }
  return hits;
}

}  // namespace

UsageCounts& UsageCounts::operator+=(const UsageCounts& other) {
  for (const auto& [name, field] : k_fields) {
    this->*field += other.*field;
  }
  return *this;
}

json counts_to_json(const UsageCounts& counts) {
  json value = json::object();
  for (const auto& [name, field] : k_fields) {
    value[name] = counts.*field;
  }
  value["hit_rate"] = counts.lookups > 0 ? json(static_cast<double>(counts.hits) / static_cast<double>(counts.lookups))
                                         : json(nullptr);
  return value;
}

Result<UsageCounts> counts_from_json(const json& value) {
  UsageCounts counts;
  if (!value.is_object()) {
    return Error::corrupt("usage counts are not an object");
  }
  for (const auto& [name, field] : k_fields) {
    auto it = value.find(name);
    if (it == value.end()) {
      continue;
    }
    if (!it->is_number_integer() || it->get<std::int64_t>() < 0) {
      return Error::corrupt(std::string("usage counts: \"") + name + "\" is not a non-negative integer");
    }
    counts.*field = it->get<std::int64_t>();
  }
  return counts;
}

UsageSeries::UsageSeries(std::int64_t resolution_ms, std::size_t slots)
    : m_resolution_ms(resolution_ms), m_slots(slots) {}

UsageBucket& UsageSeries::bucket_for(std::int64_t at_ms) {
  const std::int64_t index = at_ms / m_resolution_ms;
  UsageBucket& bucket = m_slots[static_cast<std::size_t>(index) % m_slots.size()];
  const std::int64_t start = index * m_resolution_ms;
  if (bucket.start_ms != start) {
    bucket = UsageBucket{};
    bucket.start_ms = start;
  }
  return bucket;
}

const UsageBucket* UsageSeries::find(std::int64_t start_ms) const {
  const UsageBucket& bucket = m_slots[static_cast<std::size_t>(start_ms / m_resolution_ms) % m_slots.size()];
  return bucket.start_ms == start_ms ? &bucket : nullptr;
}

template <class Visit>
void UsageSeries::for_each_in(std::int64_t from_ms, std::int64_t to_ms, Visit visit) const {
  // Only the ring's span can be present: never walk further back than that.
  std::int64_t start = std::max(from_ms, to_ms - span_ms());
  start = (start + m_resolution_ms - 1) / m_resolution_ms * m_resolution_ms;
  for (; start < to_ms; start += m_resolution_ms) {
    if (const UsageBucket* bucket = find(start)) {
      visit(*bucket);
    }
  }
}

void UsageSeries::add(std::int64_t at_ms, const UsageCounts& counts) { bucket_for(at_ms).counts += counts; }

void UsageSeries::name_hit(std::int64_t at_ms, const std::string& op_type, const std::string& scenario) {
  UsageBucket& bucket = bucket_for(at_ms);
  add_named(bucket.op_types, op_type, 1);
  add_named(bucket.scenarios, scenario, 1);
}

void UsageSeries::add_series(const UsageSeries& other) {
  for (const UsageBucket& theirs : other.m_slots) {
    if (theirs.start_ms < 0) {
      continue;
    }
    UsageBucket& slot = m_slots[static_cast<std::size_t>(theirs.start_ms / m_resolution_ms) % m_slots.size()];
    if (slot.start_ms > theirs.start_ms) {
      continue;
    }
    if (slot.start_ms < theirs.start_ms) {
      slot = theirs;
      continue;
    }
    slot.counts += theirs.counts;
    for (const auto& [name, hits] : theirs.op_types) {
      add_named(slot.op_types, name, hits);
    }
    for (const auto& [name, hits] : theirs.scenarios) {
      add_named(slot.scenarios, name, hits);
    }
  }
}

void UsageSeries::take_back_miss(std::int64_t at_ms) {
  const std::int64_t start = at_ms / m_resolution_ms * m_resolution_ms;
  UsageBucket& bucket = m_slots[static_cast<std::size_t>(at_ms / m_resolution_ms) % m_slots.size()];
  if (bucket.start_ms == start && bucket.counts.misses > 0) {
    --bucket.counts.misses;
    --bucket.counts.lookups;
  }
}

UsageCounts UsageSeries::sum(std::int64_t from_ms, std::int64_t to_ms) const {
  UsageCounts total;
  for_each_in(from_ms, to_ms, [&](const UsageBucket& bucket) { total += bucket.counts; });
  return total;
}

std::vector<UsageCounts> UsageSeries::steps(std::int64_t from_ms, std::int64_t to_ms, std::int64_t step_ms) const {
  std::vector<UsageCounts> points;
  for (std::int64_t start = from_ms; start < to_ms; start += step_ms) {
    points.push_back(sum(start, std::min(start + step_ms, to_ms)));
  }
  return points;
}

void UsageSeries::add_named_hits(std::int64_t from_ms, std::int64_t to_ms, HitsByName& op_types,
                                 HitsByName& scenarios) const {
  for_each_in(from_ms, to_ms, [&](const UsageBucket& bucket) {
    for (const auto& [name, hits] : bucket.op_types) {
      op_types[name] += hits;
    }
    for (const auto& [name, hits] : bucket.scenarios) {
      scenarios[name] += hits;
    }
  });
}

json UsageSeries::to_json() const {
  json buckets = json::array();
  for (const auto& bucket : m_slots) {
    if (bucket.start_ms < 0) {
      continue;
    }
    buckets.push_back({{"start_ms", bucket.start_ms},
                       {"counts", counts_to_json(bucket.counts)},
                       {"op_types", bucket.op_types},
                       {"scenarios", bucket.scenarios}});
  }
  return buckets;
}

Status UsageSeries::from_json(const json& value) {
  if (!value.is_array()) {
    return Error::corrupt("usage buckets are not an array");
  }
  std::vector<UsageBucket> slots(m_slots.size());
  for (const auto& item : value) {
    auto start = item.is_object() ? item.find("start_ms") : item.end();
    if (start == item.end() || !start->is_number_integer() || start->get<std::int64_t>() < 0 ||
        start->get<std::int64_t>() % m_resolution_ms != 0) {
      return Error::corrupt("usage bucket without a start_ms on this series' resolution");
    }
    UsageBucket bucket;
    bucket.start_ms = start->get<std::int64_t>();
    auto counts = counts_from_json(item.value("counts", json::object()));
    auto op_types = named_from_json(item.value("op_types", json::object()), "op_types");
    auto scenarios = named_from_json(item.value("scenarios", json::object()), "scenarios");
    if (!counts || !op_types || !scenarios) {
      return !counts ? counts.error() : !op_types ? op_types.error() : scenarios.error();
    }
    bucket.counts = *counts;
    bucket.op_types = std::move(*op_types);
    bucket.scenarios = std::move(*scenarios);
    UsageBucket& slot = slots[static_cast<std::size_t>(bucket.start_ms / m_resolution_ms) % slots.size()];
    if (slot.start_ms < bucket.start_ms) {
      slot = std::move(bucket);
    }
  }
  m_slots = std::move(slots);
  return {};
}

}  // namespace opcache::server
