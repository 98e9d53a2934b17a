#include "server/kernel_lookups.hpp"

#include <algorithm>
#include <functional>
#include <vector>

namespace opcache::server {

std::size_t KernelLookups::EpisodeHash::operator()(const EpisodeRef& id) const noexcept {
  return std::hash<std::string_view>{}(id.key) ^ (id.client * 0x9e3779b97f4a7c15ULL);
}

LookupEffect KernelLookups::answer(std::string_view key, std::uint64_t client, KernelAnswer answer,
                                   std::int64_t now_ms) {
  const EpisodeRef id{key, client};
  const auto found = m_episodes.find(id);
  if (found == m_episodes.end() || now_ms - found->second.last_ms > k_episode_ms) {
    if (found != m_episodes.end()) {
      m_episodes.erase(found);
    }
    return begin(id, answer, now_ms);
  }
  found->second.last_ms = std::max(found->second.last_ms, now_ms);
  return go_on(found->second, answer);
}

LookupEffect KernelLookups::begin(EpisodeRef id, KernelAnswer answer, std::int64_t now_ms) {
  LookupEffect effect;
  Episode episode;
  episode.first_ms = now_ms;
  episode.last_ms = now_ms;
  switch (answer) {
    case KernelAnswer::absent:
      episode.state = State::missed;
      effect.miss = true;
      break;
    case KernelAnswer::found:
    case KernelAnswer::sent:
      episode.state = State::served;
      episode.saved = answer == KernelAnswer::sent;
      effect.hit = true;
      effect.saved = episode.saved;
      break;
    case KernelAnswer::built:
      return effect;  // an upload nobody asked for first (a push): no lookup
  }
  if (m_episodes.size() >= k_capacity) {
    make_room(now_ms);
  }
  m_episodes.emplace(EpisodeId{std::string(id.key), id.client}, episode);
  return effect;
}

LookupEffect KernelLookups::go_on(Episode& episode, KernelAnswer answer) {
  LookupEffect effect;
  if (answer == KernelAnswer::built) {
    if (episode.state == State::missed) {
      episode.state = State::built;  // its miss stands: this client compiles the kernel
    }
    return effect;
  }
  if (answer == KernelAnswer::absent || episode.state == State::built) {
    return effect;  // asked again, or the client's re-check around its own build
  }
  if (episode.state == State::missed) {
    episode.state = State::served;  // answered after all (a wait woken by an upload)
    effect.hit = true;
    effect.unmiss_at_ms = episode.first_ms;
  }
  if (answer == KernelAnswer::sent && !episode.saved) {
    episode.saved = true;
    effect.saved = true;
  }
  return effect;
}

void KernelLookups::make_room(std::int64_t now_ms) {
  std::erase_if(m_episodes, [now_ms](const auto& item) { return now_ms - item.second.last_ms > k_episode_ms; });
  if (m_episodes.size() < k_capacity) {
    return;
  }
  // Still full: end the least recently active tenth.
  std::vector<std::int64_t> last;
  last.reserve(m_episodes.size());
  for (const auto& [id, episode] : m_episodes) {
    last.push_back(episode.last_ms);
  }
  const auto cut = last.begin() + static_cast<std::ptrdiff_t>(last.size() / 10);
  std::nth_element(last.begin(), cut, last.end());
  const std::int64_t oldest_kept = *cut;
  std::erase_if(m_episodes, [oldest_kept](const auto& item) { return item.second.last_ms < oldest_kept; });
  while (m_episodes.size() >= k_capacity) {  // all equally recent: any will do
    m_episodes.erase(m_episodes.begin());
  }
}

}  // namespace opcache::server
