#include "server/http_server.hpp"

#include <chrono>
#include <thread>

#include <boost/beast/core.hpp>

#include "remote/s3/bucket.hpp"
#include "server/bucket_leases.hpp"
#include "server/http_session.hpp"
#include "server/server_state.hpp"

namespace opcache::server {

namespace {

namespace beast = boost::beast;
using State = HttpServer::State;

// Accepts connections on one address and starts a session for each.
class Listener : public std::enable_shared_from_this<Listener> {
 public:
  Listener(std::shared_ptr<State> state, std::shared_ptr<tcp::acceptor> acceptor)
      : m_state(std::move(state)), m_acceptor(std::move(acceptor)), m_retry(m_state->ioc) {
    // Synchronous accepts (accept_waiting) must not block.
    beast::error_code ignored;
    m_acceptor->non_blocking(true, ignored);
  }

  void accept() {
    m_acceptor->async_accept(m_state->context_for_connection(),
                             [self = shared_from_this()](beast::error_code ec, ConnectionSocket socket) {
                               self->on_accept(ec, std::move(socket));
                             });
  }

 private:
  void on_accept(beast::error_code ec, ConnectionSocket socket) {
    if (ec == net::error::operation_aborted || !m_acceptor->is_open()) {
      return;  // stopping
    }
    if (ec) {
      // Out of descriptors or similar: back off instead of spinning.
      m_state->log->event("accept failed: " + ec.message());
      m_retry.expires_after(std::chrono::milliseconds(100));
      m_retry.async_wait([self = shared_from_this()](beast::error_code) { self->accept(); });
      return;
    }
    m_state->connection_accepted();
    start_session(m_state, std::move(socket));
    accept_waiting();
    accept();
  }

  // Takes the connections already waiting (up to k_accept_burst) at once. One
  // accept per turn of the event loop left a burst of new connections (wrk
  // opening 512) waiting hundreds of milliseconds for their first answer.
  void accept_waiting() {
    for (int i = 0; i < k_accept_burst; ++i) {
      beast::error_code ec;
      ConnectionSocket socket = m_acceptor->accept(m_state->context_for_connection(), ec);
      if (ec) {
        return;  // would_block: none waiting; other errors: the next async_accept reports them
      }
      m_state->connection_accepted();
      start_session(m_state, std::move(socket));
    }
  }

  static constexpr int k_accept_burst = 64;

  std::shared_ptr<State> m_state;
  std::shared_ptr<tcp::acceptor> m_acceptor;
  net::steady_timer m_retry;
};

Result<tcp::endpoint> resolve(const ListenAddress& address) {
  beast::error_code ec;
  auto ip = net::ip::make_address(address.host == "localhost" ? "127.0.0.1" : address.host, ec);
  if (ec) {
    return Error::usage("listen address \"" + address.host + "\" is not a numeric IP address");
  }
  return tcp::endpoint(ip, address.port);
}

std::string endpoint_text(const tcp::endpoint& endpoint) {
  auto address = endpoint.address();
  std::string host = address.is_v6() ? "[" + address.to_string() + "]" : address.to_string();
  return host + ":" + std::to_string(endpoint.port());
}

}  // namespace

HttpServer::HttpServer(ServerConfig config, std::unique_ptr<Storage> storage, TokenTable tokens)
    : m_state(std::make_shared<State>(std::move(config), std::move(storage), std::move(tokens))) {}

HttpServer::~HttpServer() {
  m_state->workers.join();
}

Result<std::vector<std::string>> HttpServer::start() {
  auto& state = *m_state;
  auto log = AccessLog::open(state.config.access_log, state.config.log_format,
                             std::chrono::milliseconds(state.config.access_log_flush_ms));
  if (!log) {
    return log.error();
  }
  state.log.emplace(std::move(*log));
  std::string lease_note;
  state.api.use_leases(open_lease_book(*state.storage, &lease_note));
  if (!lease_note.empty()) {
    state.log->event(lease_note);
  }
  if (state.config.redirect_downloads && !state.storage->locates_bundles()) {
    state.log->event("--redirect-downloads has no effect: the storage is local, so its downloads are served");
  }
  if (auto trusted = state.api.load_trusted_keys(); !trusted) {
    return trusted.error();
  }
  if (!state.config.trusted_keys_file.empty()) {
    state.log->event("trusting " + std::to_string(state.api.trusted_key_count()) + " signing keys from " +
                     state.config.trusted_keys_file.string() +
                     (state.config.require_signature ? "; uploads must be signed by one" : ""));
  }
  if (state.config.tls()) {
    auto tls = load_tls_context(state.config);
    if (!tls) {
      return tls.error();
    }
    base::MutexLock lock(state.auth_mutex);
    state.tls = *tls;
  }
  std::vector<std::string> bound;
  for (const auto& address : state.config.listen) {
    auto endpoint = resolve(address);
    if (!endpoint) {
      return endpoint.error();
    }
    auto acceptor = std::make_shared<tcp::acceptor>(state.ioc);
    beast::error_code ec;
    acceptor->open(endpoint->protocol(), ec);
    if (!ec) {
      acceptor->set_option(net::socket_base::reuse_address(true), ec);
    }
    if (!ec) {
      acceptor->bind(*endpoint, ec);
    }
    if (!ec) {
      acceptor->listen(net::socket_base::max_listen_connections, ec);
    }
    if (ec) {
      return Error::io("cannot listen on " + endpoint_text(*endpoint) + ": " + ec.message());
    }
    bound.push_back(endpoint_text(acceptor->local_endpoint()));
    state.acceptors.push_back(acceptor);
    std::make_shared<Listener>(m_state, acceptor)->accept();
  }
  // Named now that the first port is known; loaded before run() answers a request.
  state.replica = state.config.replica.empty() ? default_replica_name(state.acceptors.front()->local_endpoint().port())
                                               : state.config.replica;
  state.metrics.set_replica(state.replica, [&usage = state.api.usage()] { return usage.replica_totals(); });
  if (auto* bucket = state.storage->shared_bucket()) {
    state.usage_history.share_through(bucket->client(), state.replica, state.config.stats_interval_s);
  }
  if (auto note = state.usage_history.load()) {
    state.log->event(*note);
  }
  state.log->event("replica " + state.replica +
                   (state.usage_history.shared()
                        ? ": usage statistics shared through the bucket every " +
                              std::to_string(state.usage_history.interval_s()) + " s"
                        : ""));
  state.refresh_team_usage();
  state.wait_for_signal();
  state.save_usage_periodically();
  state.flush_log_periodically();
  for (const auto& address : bound) {
    state.log->event(std::string("listening on ") + (state.config.tls() ? "https://" : "http://") + address +
                     " (storage: " + state.storage->describe() + ")");
  }
  return bound;
}

void HttpServer::run() {
  std::vector<std::thread> threads;
  for (auto& context : m_state->extra_contexts) {
    threads.emplace_back([state = m_state, context = context.get()] { context->run(); });
  }
  m_state->ioc.run();
  for (auto& thread : threads) {
    thread.join();
  }
  m_state->workers.join();
  if (auto failed = m_state->usage_history.save()) {
    m_state->log->event(*failed);
  }
  m_state->log->event("stopped");
}

void HttpServer::request_stop() {
  net::post(m_state->ioc, [state = m_state] { state->begin_stop(); });
}

}  // namespace opcache::server
