#include "server/entry_wait.hpp"

#include <algorithm>
#include <chrono>
#include <optional>

namespace opcache::server {

namespace {

using Clock = std::chrono::steady_clock;

constexpr auto k_poll = std::chrono::seconds(1);

class EntryWait : public std::enable_shared_from_this<EntryWait> {
 public:
  EntryWait(std::shared_ptr<HttpServer::State> state, net::any_io_executor executor, ApiCall call, std::string key,
            std::function<void(ApiResponse)> done)
      : m_state(std::move(state)),
        m_executor(executor),
        m_timer(executor),
        m_call(std::move(call)),
        m_key(std::move(key)),
        m_done(std::move(done)),
        m_deadline(Clock::now() + m_call.wait) {}

  void start() { check(); }

 private:
  // What one look found: the storage's answer and, while it is a miss,
  // whether the lease live at the start has ended.
  struct Look {
    ApiResponse response;
    bool lease_ended = false;
  };

  // Subscribes first, then looks: an upload between the look and the
  // subscription would otherwise wait for the next poll. The look runs on
  // the I/O thread only when both the read and the leases stay in memory
  // or on local disk; over a bucket it goes to the worker pool.
  void check() {
    m_woken = false;
    m_subscription = m_state->api.events().subscribe(m_key, [self = shared_from_this()] {
      net::post(self->m_executor, [self] {
        self->m_woken = true;
        self->m_timer.cancel();
      });
    });
    if (m_call.on_io_thread && m_state->api.leases().is_local()) {
      on_checked(look());
      return;
    }
    net::post(m_state->workers, [self = shared_from_this()] {
      auto found = std::make_shared<Look>(self->look());
      net::post(self->m_executor, [self, found] { self->on_checked(std::move(*found)); });
    });
  }

  // Runs the lookup, then on a miss reads the key's lease: the first look
  // remembers the live one, later ones tell whether it ended. Touches
  // m_lease_at_start and m_looked from one thread at a time (each look is
  // posted after the previous one's answer).
  Look look() {
    Look found{m_call.run()};
    if (found.response.status != 404) {
      return found;
    }
    auto lease = m_state->api.leases().live(m_key);
    if (!lease) {
      return found;  // the bucket did not answer: keep waiting, the deadline still holds
    }
    if (!m_looked) {
      m_looked = true;
      if (*lease) {
        m_lease_at_start = (*lease)->id;
      }
      return found;
    }
    found.lease_ended = m_lease_at_start && (!*lease || (*lease)->id != *m_lease_at_start);
    return found;
  }

  void on_checked(Look found) {
    if (found.response.status != 404) {
      finish(std::move(found.response));
      return;
    }
    if (m_state->stopping) {
      finish(error_response(503, "unavailable", "the server is shutting down"));
      return;
    }
    const auto now = Clock::now();
    if (now >= m_deadline) {
      finish(std::move(found.response));
      return;
    }
    if (found.lease_ended) {
      finish(error_response(404, "not_found", "no entry for key " + m_key +
                                                  ": the build lease on it ended without it (ask for the lease)"));
      return;
    }
    if (m_woken) {
      check();  // woken while the storage was being read
      return;
    }
    m_timer.expires_after(std::min<Clock::duration>(k_poll, m_deadline - now));
    m_timer.async_wait([self = shared_from_this()](boost::system::error_code) {
      self->m_state->api.events().unsubscribe(self->m_subscription);
      self->check();
    });
  }

  void finish(ApiResponse response) {
    m_state->api.events().unsubscribe(m_subscription);
    m_done(std::move(response));
  }

  std::shared_ptr<HttpServer::State> m_state;
  net::any_io_executor m_executor;
  net::steady_timer m_timer;
  ApiCall m_call;
  std::string m_key;
  std::function<void(ApiResponse)> m_done;
  Clock::time_point m_deadline;
  std::optional<std::string> m_lease_at_start;
  bool m_looked = false;
  std::uint64_t m_subscription = 0;
  bool m_woken = false;
};

}  // namespace

void wait_for_entry(const std::shared_ptr<HttpServer::State>& state, net::any_io_executor executor, ApiCall call,
                    const std::string& key, std::function<void(ApiResponse)> done) {
  auto wait = std::make_shared<EntryWait>(state, executor, std::move(call), key, std::move(done));
  wait->start();
}

}  // namespace opcache::server
