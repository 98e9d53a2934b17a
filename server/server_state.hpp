// The state every listener and session of `opcache serve` shares: the
// configuration, storage, API and metrics, the current tokens and TLS
// context (reloaded on SIGHUP), the in-flight limit, the live sessions, and
// graceful shutdown. Internal to server/ (http_server.cpp, http_session.cpp).
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>

#include "base/mutex.hpp"
#include "server/access_log.hpp"
#include "server/api.hpp"
#include "server/http_server.hpp"
#include "server/metrics.hpp"
#include "server/usage_history.hpp"

namespace opcache::server {

namespace net = boost::asio;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;

// Anything a session may be asked to do from outside its own strand.
class SessionBase : public std::enable_shared_from_this<SessionBase> {
 public:
  virtual ~SessionBase() = default;
  /// Closes the connection if it is waiting for a request (graceful stop).
  virtual void close_if_idle() = 0;
};

/// A TLS server context from config.tls_cert and config.tls_key; `usage`
/// error naming the file that cannot be loaded.
Result<std::shared_ptr<ssl::context>> load_tls_context(const ServerConfig& config);

// Everything the listeners and sessions share. Lives as long as any of them.
//
// Each I/O thread runs its own io_context (`ioc` on the thread that calls
// run(), one of `extra_contexts` on each other one), and each connection
// lives on one of them, handed out in turn: a connection's handlers never
// run on two threads, so sessions need no strand, and the threads share no
// queue (one shared context made every request wake the other thread).
struct HttpServer::State : std::enable_shared_from_this<HttpServer::State> {
  State(ServerConfig config_in, std::unique_ptr<Storage> storage_in, TokenTable tokens_in)
      : config(std::move(config_in)),
        storage(std::move(storage_in)),
        api(*storage, metrics, config),
        usage_history(api.usage(), storage->state_dir()),
        tokens(std::make_shared<const TokenTable>(std::move(tokens_in))),
        workers(static_cast<std::size_t>(config.workers)),
        signals(ioc, SIGTERM, SIGINT, SIGHUP),
        shutdown_timer(ioc),
        usage_timer(ioc),
        log_flush_timer(ioc) {
    for (int i = 1; i < config.threads; ++i) {
      extra_contexts.push_back(std::make_unique<net::io_context>(1));
      extra_guards.push_back(net::make_work_guard(*extra_contexts.back()));
    }
  }

  ServerConfig config;
  std::unique_ptr<Storage> storage;
  Metrics metrics;
  Api api;
  UsageHistory usage_history;
  std::string replica;  // this replica's name (--replica, else host:first port), set by start()
  std::optional<AccessLog> log;

  // Replaced by reload() (SIGHUP) while sessions read them: a session takes
  // a copy of the pointer (current_tokens, current_tls) and uses that.
  base::Mutex auth_mutex;
  std::shared_ptr<const TokenTable> tokens GUARDED_BY(auth_mutex);
  std::shared_ptr<ssl::context> tls GUARDED_BY(auth_mutex);

  net::io_context ioc{1};  // signals, listeners, the shutdown timer, and its share of the connections
  std::vector<std::unique_ptr<net::io_context>> extra_contexts;  // one per further I/O thread
  // Keep the extra contexts running while they have no connection; dropped by begin_stop.
  std::vector<net::executor_work_guard<net::io_context::executor_type>> extra_guards;
  std::atomic<std::size_t> next_context{0};
  net::thread_pool workers;
  net::signal_set signals;
  net::steady_timer shutdown_timer;
  net::steady_timer usage_timer;  // saves the usage history every usage_history.interval_s()
  net::steady_timer log_flush_timer;  // writes the access log's waiting lines (flush_log_periodically)
  std::vector<std::shared_ptr<tcp::acceptor>> acceptors;

  std::atomic<bool> stopping{false};
  std::atomic<bool> usage_busy{false};  // a save (and team refresh) is running on the worker pool
  std::atomic<int> inflight{0};

  base::Mutex sessions_mutex;
  std::unordered_map<SessionBase*, std::weak_ptr<SessionBase>> sessions GUARDED_BY(sessions_mutex);

  std::shared_ptr<const TokenTable> current_tokens() {
    base::MutexLock lock(auth_mutex);
    return tokens;
  }
  std::shared_ptr<ssl::context> current_tls() {
    base::MutexLock lock(auth_mutex);
    return tls;
  }

  /// The context for the next new connection; connection_accepted() moves
  /// on to the next one, so contexts take connections in turn. Called by the
  /// listeners (on `ioc`'s thread).
  net::io_context& context_for_connection() {
    const std::size_t i = next_context.load(std::memory_order_relaxed) % (extra_contexts.size() + 1);
    return i == 0 ? ioc : *extra_contexts[i - 1];
  }
  void connection_accepted() { next_context.fetch_add(1, std::memory_order_relaxed); }

  /// Stops every I/O context at once (the grace period is over).
  void stop_contexts() {
    ioc.stop();
    for (auto& context : extra_contexts) {
      context->stop();
    }
  }

  bool acquire_inflight() {
    if (inflight.fetch_add(1) >= config.max_inflight) {
      inflight.fetch_sub(1);
      return false;
    }
    return true;
  }
  void release_inflight() { inflight.fetch_sub(1); }

  void add_session(const std::shared_ptr<SessionBase>& session) {
    base::MutexLock lock(sessions_mutex);
    sessions[session.get()] = session;
  }

  /// Forgets a session; the last one to go during a stop ends the grace period early.
  void remove_session(SessionBase* session);

  /// SIGHUP: reloads the tokens file, the trusted keys and the TLS certificate, keeping the old ones on failure.
  void reload();

  /// Stops accepting, closes idle sessions and gives the others shutdown_grace_s. Idempotent.
  void begin_stop();

  /// Waits for SIGTERM/SIGINT (stop) or SIGHUP (reload, then wait again).
  void wait_for_signal();

  /// Saves the usage history on the worker pool every
  /// usage_history.interval_s() until the stop begins, and over a shared
  /// bucket reads the other replicas' figures after each save (a tick whose
  /// predecessor still runs is skipped).
  void save_usage_periodically();

  /// Over a shared bucket, reads the other replicas' usage figures on the
  /// worker pool now (unless a save or read is running); logs what it says.
  void refresh_team_usage();

  /// Writes the access log's waiting lines every access_log_flush_ms (none
  /// when it is 0) until the stop begins; the "stopped" event writes the rest.
  void flush_log_periodically();
};

}  // namespace opcache::server
