#include "server/team_usage.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <utility>

#include "base/json_parse.hpp"
#include "base/utc_time.hpp"
#include "remote/s3/client.hpp"
#include "remote/s3/layout.hpp"

namespace opcache::server {

namespace team_usage_impl {

using json = nlohmann::json;

constexpr int k_list_page = 1000;

std::int64_t wall_clock_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool replica_character(char c) { return c > ' ' && c < 0x7f && c != '/'; }

std::string when(std::int64_t ms) { return base::utc_text(ms, "%Y-%m-%d %H:%M:%S UTC"); }

std::string names_text(const std::vector<std::string>& names) {
  std::string text;
  for (const auto& name : names) {
    text += (text.empty() ? "" : ", ") + name;
  }
  return text;
}

// The replica an object of the listing belongs to, when the object is one
// (".json"; not a ".bad" copy).
std::optional<std::string> replica_of_object(const std::string& name) {
  const std::string root = remote::k_s3_usage_root;
  const std::string suffix = ".json";
  if (name.size() <= root.size() + suffix.size() || name.compare(0, root.size(), root) != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
    return std::nullopt;
  }
  const std::string component = name.substr(root.size(), name.size() - root.size() - suffix.size());
  if (component.find('/') != std::string::npos) {
    return std::nullopt;
  }
  return remote::s3_component_decode(component);
}

// A document's tables and when it was saved, or why it cannot be used.
struct ReadDocument {
  UsageTables tables;
  std::int64_t saved_ms = 0;
  std::string replica;  // its "replica", "" when it names none
};

Result<ReadDocument> document_of(const std::string& text, const std::string& origin) {
  auto value = base::parse_json(text, origin);
  if (!value) {
    return value.error();
  }
  auto tables = parse_usage_document(*value);
  if (!tables) {
    return Error::corrupt(origin + ": " + tables.error().message());
  }
  auto replica = value->find("replica");
  return ReadDocument{std::move(*tables), usage_document_saved_ms(*value),
                      replica != value->end() && replica->is_string() ? replica->get<std::string>() : ""};
}

}  // namespace team_usage_impl

using team_usage_impl::json;

std::optional<std::string> replica_name_problem(std::string_view name) {
  if (name.empty() || name.size() > k_max_replica_name) {
    return "must be 1 to " + std::to_string(k_max_replica_name) + " characters (it has " +
           std::to_string(name.size()) + ")";
  }
  for (std::size_t i = 0; i < name.size(); ++i) {
    if (!team_usage_impl::replica_character(name[i])) {
      return "must be visible ASCII characters other than '/' (character " + std::to_string(i + 1) + " is not)";
    }
  }
  return std::nullopt;
}

std::string default_replica_name(int port) {
  char host[HOST_NAME_MAX + 1] = {};
  std::string name = ::gethostname(host, sizeof host - 1) == 0 ? std::string(host) : std::string();
  for (char& c : name) {
    c = team_usage_impl::replica_character(c) ? c : '_';
  }
  const std::string suffix = ":" + std::to_string(port);
  name = name.empty() ? "localhost" : name.substr(0, k_max_replica_name - suffix.size());
  return name + suffix;
}

TeamUsage::TeamUsage(remote::S3Client& client, std::string replica, UsageStats& stats, Clock clock)
    : m_client(client),
      m_replica(std::move(replica)),
      m_name(remote::s3_usage_name(m_replica)),
      m_stats(stats),
      m_clock(clock ? std::move(clock) : Clock(team_usage_impl::wall_clock_ms)) {}

std::optional<std::string> TeamUsage::load() {
  base::MutexLock lock(m_mutex);
  return load_locked();
}

std::optional<std::string> TeamUsage::load_locked() {
  auto object = m_client.get_text(m_name, k_max_object_bytes);
  if (!object) {
    return "usage statistics of replica \"" + m_replica + "\" not read back from the bucket (" +
           object.error().message() + "); tried again before each save";
  }
  m_loaded = true;
  if (!*object) {
    return std::nullopt;  // a replica's first start under this name
  }
  auto document = team_usage_impl::document_of((*object)->body, m_name);
  if (!document) {
    const auto aside = keep_aside((*object)->body);
    return "usage statistics of replica \"" + m_replica + "\" start empty: " + document.error().message() +
           (aside ? "; the object was copied to " + m_name + ".bad"
                  : "; it could not be copied aside (" + aside.error().message() + ") and stays until the next save");
  }
  m_stats.absorb(document->tables);
  return "usage statistics of replica \"" + m_replica + "\" read back from the bucket (saved " +
         team_usage_impl::when(document->saved_ms) + ")";
}

std::optional<std::string> TeamUsage::save() {
  base::MutexLock lock(m_mutex);
  std::optional<std::string> note;
  if (!m_loaded) {
    note = load_locked();
    if (!m_loaded) {
      return "usage statistics not saved to the bucket: " + note.value_or("its object could not be read first");
    }
  }
  json document = m_stats.document();
  document["replica"] = m_replica;
  if (auto written = write_object(m_name, document.dump(-1, ' ', false, json::error_handler_t::replace));
      !written) {
    return "usage statistics not saved to the bucket: " + written.error().message();
  }
  return note;
}

Status TeamUsage::write_object(const std::string& name, const std::string& text) {
  auto written = m_client.put_text(name, text, remote::S3WriteCondition::always());
  if (!written) {
    return written.error();
  }
  return {};
}

Status TeamUsage::keep_aside(const std::string& body) { return write_object(m_name + ".bad", body); }

std::optional<std::string> TeamUsage::read_other(const std::string& name, const std::string& etag, Seen& seen) {
  auto object = m_client.get_text(name, k_max_object_bytes);
  if (!object) {
    // Read again next time: the ETag is not taken.
    return "usage statistics of " + name + " not read (" + object.error().message() + ")";
  }
  if (!*object) {
    seen = Seen{};  // deleted since the listing
    return std::nullopt;
  }
  seen.etag = (*object)->etag.empty() ? etag : (*object)->etag;
  auto document = team_usage_impl::document_of((*object)->body, name);
  if (!document) {
    seen.tables = nullptr;
    return "usage statistics of another replica left out of the team's figures (the object stays as it is): " +
           document.error().message();
  }
  seen.saved_ms = document->saved_ms;
  seen.replica = !document->replica.empty() ? document->replica
                                            : team_usage_impl::replica_of_object(name).value_or(name);
  seen.tables = std::make_shared<const UsageTables>(std::move(document->tables));
  return std::nullopt;
}

std::vector<std::string> TeamUsage::refresh() {
  const std::int64_t now = m_clock();
  base::MutexLock lock(m_mutex);
  if (m_last_refresh_ms && now - *m_last_refresh_ms < k_refresh_ms) {
    return {};
  }
  m_last_refresh_ms = now;
  std::vector<std::string> notes;
  std::map<std::string, std::string> listed;  // object name → ETag
  std::string token;
  do {
    auto page = m_client.list(remote::k_s3_usage_root, "", token, team_usage_impl::k_list_page);
    if (!page) {
      if (!m_listing_failed) {
        notes.push_back("the other replicas' usage statistics not read, the team's figures stay as they were: " +
                        page.error().message());
      }
      m_listing_failed = true;
      return notes;
    }
    for (const auto& object : page->objects) {
      if (object.name != m_name && team_usage_impl::replica_of_object(object.name)) {
        listed.emplace(object.name, object.etag);
      }
    }
    token = page->next_continuation_token;
  } while (!token.empty());
  if (m_listing_failed) {
    notes.push_back("the other replicas' usage statistics are read again");
    m_listing_failed = false;
  }
  std::erase_if(m_seen, [&](const auto& seen) { return listed.count(seen.first) == 0; });
  for (const auto& [name, etag] : listed) {
    Seen& seen = m_seen[name];
    if (seen.etag.empty() || seen.etag != etag) {
      if (auto note = read_other(name, etag, seen)) {
        notes.push_back(*note);
      }
    }
  }
  std::string included;  // the objects the figures are made of, by name and version
  for (const auto& [name, seen] : m_seen) {
    if (seen.tables && now - seen.saved_ms <= k_retention_ms) {
      included += name + " " + seen.etag + "\n";
    }
  }
  if (m_included && *m_included == included) {
    return notes;  // nothing changed: the figures given before stand
  }
  m_included = included;
  auto team = std::make_shared<TeamFigures>();
  for (const auto& [name, seen] : m_seen) {
    if (seen.tables && now - seen.saved_ms <= k_retention_ms) {
      add_tables(team->others, *seen.tables);
      add_upload_times(team->uploaded, *seen.tables);
      team->replicas.push_back(seen.replica);
    }
  }
  // Keys uploaded through any replica leave every replica's misses.
  const json records = team->others.misses.to_json();
  MissTable misses(team->others.misses.capacity());
  (void)misses.from_json(merge_missed({&records}, team->uploaded, misses.capacity()));  // well-formed records
  team->others.misses = std::move(misses);
  std::sort(team->replicas.begin(), team->replicas.end());
  if (team->replicas != m_merged) {
    notes.push_back(team->replicas.empty()
                        ? "usage statistics: no other replica's figures to add"
                        : "usage statistics: adding the figures of " + std::to_string(team->replicas.size()) +
                              " other replica(s): " + team_usage_impl::names_text(team->replicas));
    m_merged = team->replicas;
  }
  m_stats.set_team(team->replicas.empty() ? nullptr : std::shared_ptr<const TeamFigures>(std::move(team)));
  return notes;
}

}  // namespace opcache::server
