#include "server/bucket_leases.hpp"

#include <map>

#include "base/json_parse.hpp"
#include "base/mutex.hpp"
#include "base/random_token.hpp"
#include "base/try.hpp"
#include "remote/s3/bucket.hpp"
#include "server/lease_table.hpp"

namespace opcache::server {

namespace {

using json = nlohmann::json;
using SystemClock = std::chrono::system_clock;

constexpr const char* k_lease_format = "opcache-lease/1";
constexpr std::size_t k_max_lease_bytes = 16 * 1024;
// Rounds of read, decide, conditional write before a contended key is an
// error: each lost round means another replica changed the lease meanwhile.
constexpr int k_max_rounds = 8;

std::string lease_object_name(const std::string& key) { return "v1/leases/" + key + ".json"; }

std::int64_t to_ms(SystemClock::time_point at) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(at.time_since_epoch()).count();
}

// A lease as the bucket holds it: wall-clock times, so that every replica
// judges expiry the same way (their clocks kept by NTP).
struct StoredLease {
  std::string id;
  std::string holder;
  std::string request;
  std::int64_t granted_ms = 0;
  std::int64_t expires_ms = 0;
  bool released = false;

  bool live_at(std::int64_t now_ms) const { return !released && expires_ms > now_ms; }
};

std::string lease_text(const std::string& key, const StoredLease& lease) {
  return json{{"format", k_lease_format},          {"key", key},
              {"lease", lease.id},                 {"holder", lease.holder},
              {"request", lease.request},          {"granted_ms", lease.granted_ms},
              {"expires_ms", lease.expires_ms},    {"released", lease.released}}
      .dump();
}

// The lease in an object's text; std::nullopt for text that is not one (a
// damaged object counts as no live lease, and is replaced by the next grant).
std::optional<StoredLease> parse_stored_lease(const std::string& text) {
  auto parsed = base::parse_json(text, "lease object");
  if (!parsed || !parsed->is_object() || parsed->value("format", "") != k_lease_format) {
    return std::nullopt;
  }
  try {
    return StoredLease{parsed->at("lease").get<std::string>(),    parsed->at("holder").get<std::string>(),
                       parsed->at("request").get<std::string>(),  parsed->at("granted_ms").get<std::int64_t>(),
                       parsed->at("expires_ms").get<std::int64_t>(), parsed->at("released").get<bool>()};
  } catch (const json::exception&) {
    return std::nullopt;
  }
}

// What the bucket holds for a key now: nothing, or an object (a lease, or a
// damaged one) with the ETag a conditional write must name.
struct LeaseObject {
  std::optional<StoredLease> lease;
  std::string etag;
};

class BucketLeaseBook final : public LeaseBook {
 public:
  BucketLeaseBook(remote::S3Client& client, std::function<SystemClock::time_point()> now)
      : m_client(client), m_now(std::move(now)) {}

  std::string kind() const override { return "bucket"; }
  bool is_local() const override { return false; }

  Result<LeaseAnswer> acquire(const std::string& key, const std::string& holder, const std::string& request,
                              std::chrono::seconds ttl) override {
    const std::string id = base::random_hex(16);
    for (int round = 0; round < k_max_rounds; ++round) {
      OPCACHE_TRY_ASSIGN(auto current, read(key));
      const auto now = m_now();
      if (current && current->lease && current->lease->id == id) {
        return granted(key, *current->lease, now);  // an earlier round's write landed after all
      }
      const bool held = current && current->lease && current->lease->live_at(to_ms(now));
      if (held && !request.empty() && current->lease->request == request) {
        StoredLease again = *current->lease;  // the same request again: its answer was lost on the way
        again.expires_ms = to_ms(now + ttl);
        OPCACHE_TRY_ASSIGN(auto written, write(key, again, current->etag));
        if (written) {
          return LeaseAnswer{true, to_lease(again, now)};
        }
        continue;
      }
      if (held) {
        bump(&LeaseCounts::refused);
        return LeaseAnswer{false, to_lease(*current->lease, now)};
      }
      StoredLease fresh{id, holder, request, to_ms(now), to_ms(now + ttl), false};
      OPCACHE_TRY_ASSIGN(auto written, write(key, fresh, current ? current->etag : std::string()));
      if (written) {
        if (current && current->lease && !current->lease->released) {
          bump(&LeaseCounts::expired);  // a takeover of one that ran out
        }
        return granted(key, fresh, now);
      }
    }
    return contended(key);
  }

  Result<std::optional<Lease>> renew(const std::string& key, const std::string& id,
                                     std::chrono::seconds ttl) override {
    for (int round = 0; round < k_max_rounds; ++round) {
      OPCACHE_TRY_ASSIGN(auto current, read(key));
      const auto now = m_now();
      if (!holds(current, id, now)) {
        forget(key, id);
        return std::optional<Lease>();
      }
      StoredLease renewed = *current->lease;
      renewed.expires_ms = to_ms(now + ttl);
      OPCACHE_TRY_ASSIGN(auto written, write(key, renewed, current->etag));
      if (written) {
        remember(key, renewed);
        return std::optional<Lease>(to_lease(renewed, now));
      }
    }
    return contended(key);
  }

  Result<bool> release(const std::string& key, const std::string& id) override { return end(key, id, true); }

  Result<bool> withdraw(const std::string& key, const std::string& id) override { return end(key, id, false); }

  Status release_key(const std::string& key) override {
    OPCACHE_TRY_ASSIGN(auto current, read(key));
    if (!current) {
      return {};
    }
    OPCACHE_TRY(m_client.remove_blindly(lease_object_name(key)));
    if (current->lease && current->lease->live_at(to_ms(m_now()))) {
      bump(&LeaseCounts::released);
      forget(key, current->lease->id);
    }
    return {};
  }

  Result<std::optional<Lease>> live(const std::string& key) override {
    OPCACHE_TRY_ASSIGN(auto current, read(key));
    const auto now = m_now();
    if (!current || !current->lease || !current->lease->live_at(to_ms(now))) {
      return std::optional<Lease>();
    }
    return std::optional<Lease>(to_lease(*current->lease, now));
  }

  LeaseCounts counts() override {
    base::MutexLock lock(m_mutex);
    const auto now_ms = to_ms(m_now());
    for (auto it = m_granted_here.begin(); it != m_granted_here.end();) {
      it = it->second.expires_ms > now_ms ? std::next(it) : m_granted_here.erase(it);
    }
    LeaseCounts counts = m_counts;
    counts.active = m_granted_here.size();
    return counts;
  }

 private:
  Result<std::optional<LeaseObject>> read(const std::string& key) {
    OPCACHE_TRY_ASSIGN(auto text, m_client.get_text(lease_object_name(key), k_max_lease_bytes));
    if (!text) {
      return std::optional<LeaseObject>();
    }
    return std::optional<LeaseObject>(LeaseObject{parse_stored_lease(text->body), text->etag});
  }

  // Writes `lease` if the object is still the one with `etag` ("" = if
  // there is none); false when another write came first.
  Result<bool> write(const std::string& key, const StoredLease& lease, const std::string& etag) {
    const auto condition =
        etag.empty() ? remote::S3WriteCondition::if_absent() : remote::S3WriteCondition::if_etag(etag);
    OPCACHE_TRY_ASSIGN(auto written, m_client.put_text(lease_object_name(key), lease_text(key, lease), condition));
    return written.has_value();
  }

  // Ends the live lease `id`: marks it released (a conditional write, so a
  // takeover in between is never undone); counted when `count`.
  Result<bool> end(const std::string& key, const std::string& id, bool count) {
    for (int round = 0; round < k_max_rounds; ++round) {
      OPCACHE_TRY_ASSIGN(auto current, read(key));
      if (!holds(current, id, m_now())) {
        forget(key, id);
        return false;
      }
      StoredLease ended = *current->lease;
      ended.released = true;
      OPCACHE_TRY_ASSIGN(auto written, write(key, ended, current->etag));
      if (written) {
        forget(key, id);
        if (count) {
          bump(&LeaseCounts::released);
        } else {
          unbump(&LeaseCounts::granted);  // withdrawn: as if never granted
        }
        return true;
      }
    }
    return contended(key);
  }

  static bool holds(const std::optional<LeaseObject>& current, const std::string& id, SystemClock::time_point now) {
    return current && current->lease && current->lease->id == id && current->lease->live_at(to_ms(now));
  }

  LeaseAnswer granted(const std::string& key, const StoredLease& lease, SystemClock::time_point now) {
    bump(&LeaseCounts::granted);
    remember(key, lease);
    return LeaseAnswer{true, to_lease(lease, now)};
  }

  static Lease to_lease(const StoredLease& stored, SystemClock::time_point now) {
    const auto steady_now = std::chrono::steady_clock::now();
    const auto at = [&](std::int64_t ms) {
      return steady_now + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                              std::chrono::milliseconds(ms - to_ms(now)));
    };
    return Lease{stored.id, stored.holder, stored.request, at(stored.granted_ms), at(stored.expires_ms)};
  }

  static Error contended(const std::string& key) {
    return Error::remote("the build lease on " + key + " changed " + std::to_string(k_max_rounds) +
                         " times while this replica tried to update it; ask again");
  }

  void bump(std::uint64_t LeaseCounts::*field) {
    base::MutexLock lock(m_mutex);
    ++(m_counts.*field);
  }

  void unbump(std::uint64_t LeaseCounts::*field) {
    base::MutexLock lock(m_mutex);
    --(m_counts.*field);
  }

  void remember(const std::string& key, const StoredLease& lease) {
    base::MutexLock lock(m_mutex);
    m_granted_here[key + "/" + lease.id] = lease;
  }

  void forget(const std::string& key, const std::string& id) {
    base::MutexLock lock(m_mutex);
    m_granted_here.erase(key + "/" + id);
  }

  remote::S3Client& m_client;
  std::function<SystemClock::time_point()> m_now;
  base::Mutex m_mutex;
  LeaseCounts m_counts GUARDED_BY(m_mutex);
  // Leases this replica granted and has not seen end, by "key/id".
  std::map<std::string, StoredLease> m_granted_here GUARDED_BY(m_mutex);
};

// Why `client`'s store cannot keep leases, or "" when it honours both
// conditional writes: a second create of one name must be refused, and so
// must a write naming an ETag the object does not have.
std::string conditional_write_problem(remote::S3Client& client) {
  const std::string name = "v1/leases/.probe-" + base::random_hex(8);
  const std::string body = json{{"format", "opcache-lease-probe/1"}}.dump();
  std::string problem;
  auto first = client.put_text(name, body, remote::S3WriteCondition::if_absent());
  if (!first) {
    problem = first.error().message();
  } else if (auto again = client.put_text(name, body, remote::S3WriteCondition::if_absent()); !again) {
    problem = again.error().message();
  } else if (again->has_value()) {
    problem = "it accepted a second If-None-Match: * write of one object";
  } else if (auto stale = client.put_text(name, body, remote::S3WriteCondition::if_etag(std::string(32, '0')));
             !stale) {
    problem = stale.error().message();
  } else if (stale->has_value()) {
    problem = "it accepted a write whose If-Match named another ETag";
  }
  (void)client.remove_blindly(name);
  return problem;
}

}  // namespace

std::unique_ptr<LeaseBook> make_bucket_lease_book(remote::S3Client& client,
                                                  std::function<std::chrono::system_clock::time_point()> now) {
  return std::make_unique<BucketLeaseBook>(client, std::move(now));
}

std::unique_ptr<LeaseBook> open_lease_book(Storage& storage, std::string* note) {
  note->clear();
  auto* bucket = storage.shared_bucket();
  if (bucket == nullptr) {
    return std::make_unique<MemoryLeaseBook>();
  }
  if (auto problem = conditional_write_problem(bucket->client()); !problem.empty()) {
    *note = "build leases: in this replica's memory, because the bucket does not honour conditional writes (" +
            problem +
            "); replicas over it would each grant a lease on one kernel, so run one replica (docs/operations.md, "
            "Replicas)";
    return std::make_unique<MemoryLeaseBook>();
  }
  *note = "build leases: in the bucket, shared by every replica over it";
  return make_bucket_lease_book(bucket->client(), SystemClock::now);
}

}  // namespace opcache::server
