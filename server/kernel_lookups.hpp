// One lookup, one count: what each answer about a kernel adds to the usage
// statistics, so that they count kernels a machine asked for, not requests
// (docs/protocol.md "Statistics"). A client asks about a kernel in an
// episode of requests: HEAD then GET, the GET before a lease and the one
// after it, retries, ?wait= polls, batch frames. The episode counts once:
// a hit when the team cache gave the client the kernel (by any route, after
// a wait too), a miss when it did not. A miss that the server answers later
// in the episode (a waiter woken by another machine's upload) is taken back
// and counted as the hit it became; one the client builds itself (it takes
// the lease or uploads the kernel) stays a miss. Part of server/usage_stats.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace opcache::server {

/// What the server told one client about one kernel.
enum class KernelAnswer {
  found,   ///< present, bundle not sent (HEAD 200, GET 304)
  sent,    ///< present, bundle sent (GET 200, a batch frame with the bundle)
  absent,  ///< not there (GET/HEAD 404, a batch frame "miss" or "revoked")
  built,   ///< the client builds it itself: it was granted the kernel's lease, or uploaded it
};

/// What one answer adds to the counters.
struct LookupEffect {
  bool hit = false;   ///< count a hit now
  bool miss = false;  ///< count a miss now
  /// Take back the miss counted at this moment (Unix ms): the client was
  /// served after all. Set together with `hit`.
  std::optional<std::int64_t> unmiss_at_ms;
  bool saved = false;  ///< count the kernel's build time as saved: the first bundle sent in the episode
};

/// The open episodes, by kernel and client. Not thread-safe (UsageStats
/// locks). Memory is bounded by k_capacity episodes.
class KernelLookups {
 public:
  /// An episode ends this long after its client's last request about the
  /// kernel: a later request starts a new one (a new run of the model).
  static constexpr std::int64_t k_episode_ms = 30 * 60 * 1000;
  /// Episodes kept; beyond that the least recently active ones end.
  static constexpr std::size_t k_capacity = 100'000;

  /// Records `answer` about `key` to `client` (server/miss_table's
  /// client_hash) at `now_ms`, and says what it counts as.
  LookupEffect answer(std::string_view key, std::uint64_t client, KernelAnswer answer, std::int64_t now_ms);

  /// Open episodes (for tests).
  std::size_t size() const noexcept { return m_episodes.size(); }

 private:
  enum class State { missed, built, served };
  struct Episode {
    State state = State::missed;
    std::int64_t first_ms = 0;  ///< when it began (a miss is counted then)
    std::int64_t last_ms = 0;   ///< the client's last request about the kernel
    bool saved = false;         ///< a bundle was sent
  };

  // An episode's kernel and client; looked up by a view (EpisodeRef), so
  // that a request about an open episode allocates nothing.
  struct EpisodeId {
    std::string key;
    std::uint64_t client = 0;
  };
  struct EpisodeRef {
    std::string_view key;
    std::uint64_t client = 0;
  };
  struct EpisodeHash {
    using is_transparent = void;
    std::size_t operator()(const EpisodeRef& id) const noexcept;
    std::size_t operator()(const EpisodeId& id) const noexcept { return (*this)(EpisodeRef{id.key, id.client}); }
  };
  struct EpisodeEqual {
    using is_transparent = void;
    template <typename A, typename B>
    bool operator()(const A& a, const B& b) const noexcept {
      return a.client == b.client && std::string_view(a.key) == std::string_view(b.key);
    }
  };

  LookupEffect begin(EpisodeRef id, KernelAnswer answer, std::int64_t now_ms);
  static LookupEffect go_on(Episode& episode, KernelAnswer answer);
  void make_room(std::int64_t now_ms);

  std::unordered_map<EpisodeId, Episode, EpisodeHash, EpisodeEqual> m_episodes;  ///< by key and client
};

}  // namespace opcache::server
