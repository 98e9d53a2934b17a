#include "server/server_state.hpp"

#include <csignal>

namespace opcache::server {

Result<std::shared_ptr<ssl::context>> load_tls_context(const ServerConfig& config) {
  auto context = std::make_shared<ssl::context>(ssl::context::tls_server);
  context->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                       ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 | ssl::context::single_dh_use);
  boost::system::error_code ec;
  context->use_certificate_chain_file(config.tls_cert.string(), ec);
  if (ec) {
    return Error::usage("cannot load the TLS certificate " + config.tls_cert.string() + ": " + ec.message());
  }
  context->use_private_key_file(config.tls_key.string(), ssl::context::pem, ec);
  if (ec) {
    return Error::usage("cannot load the TLS key " + config.tls_key.string() + ": " + ec.message());
  }
  return context;
}

void HttpServer::State::remove_session(SessionBase* session) {
  bool last = false;
  {
    base::MutexLock lock(sessions_mutex);
    sessions.erase(session);
    last = sessions.empty();
  }
  if (last && stopping) {
    // Nothing in flight any more: end the grace period early.
    net::post(ioc, [self = shared_from_this()] { self->shutdown_timer.cancel(); });
  }
}

void HttpServer::State::reload() {
  if (!config.tokens_file.empty()) {
    auto loaded = TokenTable::load(config.tokens_file);
    if (loaded) {
      base::MutexLock lock(auth_mutex);
      tokens = std::make_shared<const TokenTable>(std::move(*loaded));
      log->event("reloaded " + std::to_string(tokens->size()) + " tokens from " + config.tokens_file.string());
    } else {
      log->event("tokens not reloaded, keeping the old ones: " + loaded.error().message());
    }
  }
  if (!config.trusted_keys_file.empty()) {
    if (auto loaded = api.load_trusted_keys(); loaded) {
      log->event("reloaded " + std::to_string(api.trusted_key_count()) + " trusted keys from " +
                 config.trusted_keys_file.string());
    } else {
      log->event("trusted keys not reloaded, keeping the old ones: " + loaded.error().message());
    }
  }
  if (config.tls()) {
    auto loaded = load_tls_context(config);
    if (loaded) {
      base::MutexLock lock(auth_mutex);
      tls = *loaded;
      log->event("reloaded the TLS certificate " + config.tls_cert.string());
    } else {
      log->event("TLS certificate not reloaded, keeping the old one: " + loaded.error().message());
    }
  }
}

void HttpServer::State::begin_stop() {
  if (stopping.exchange(true)) {
    return;
  }
  log->event("stopping: finishing requests in flight (up to " + std::to_string(config.shutdown_grace_s) + " s)");
  boost::system::error_code ignored;
  signals.cancel(ignored);
  usage_timer.cancel();
  log_flush_timer.cancel();
  extra_guards.clear();  // the other I/O threads end once their connections have
  for (auto& acceptor : acceptors) {
    acceptor->close(ignored);
  }
  std::vector<std::shared_ptr<SessionBase>> live;
  {
    base::MutexLock lock(sessions_mutex);
    for (auto& [pointer, weak] : sessions) {
      if (auto session = weak.lock()) {
        live.push_back(session);
      }
    }
  }
  for (auto& session : live) {
    session->close_if_idle();
  }
  api.events().notify_all();  // requests waiting for an entry answer 503 now
  if (live.empty()) {
    return;
  }
  shutdown_timer.expires_after(std::chrono::seconds(config.shutdown_grace_s));
  shutdown_timer.async_wait([self = shared_from_this()](boost::system::error_code ec) {
    if (!ec) {
      self->log->event("grace period over: closing the remaining connections");
      self->stop_contexts();
    }
  });
}

void HttpServer::State::wait_for_signal() {
  signals.async_wait([self = shared_from_this()](boost::system::error_code ec, int signal) {
    if (ec) {
      return;
    }
    if (signal == SIGHUP) {
      self->reload();
      self->wait_for_signal();
      return;
    }
    self->begin_stop();
  });
}

}  // namespace opcache::server

namespace opcache::server {

void HttpServer::State::save_usage_periodically() {
  if (!usage_history.persisted()) {
    return;
  }
  usage_timer.expires_after(std::chrono::seconds(usage_history.interval_s()));
  usage_timer.async_wait([self = shared_from_this()](boost::system::error_code ec) {
    if (ec || self->stopping) {
      return;
    }
    if (!self->usage_busy.exchange(true)) {
      net::post(self->workers, [self] {
        if (auto failed = self->usage_history.save()) {
          self->log->event(*failed);
        }
        for (const auto& line : self->usage_history.refresh_team()) {
          self->log->event(line);
        }
        self->usage_busy = false;
      });
    }
    self->save_usage_periodically();
  });
}

void HttpServer::State::refresh_team_usage() {
  if (!usage_history.shared() || usage_busy.exchange(true)) {
    return;
  }
  net::post(workers, [self = shared_from_this()] {
    for (const auto& line : self->usage_history.refresh_team()) {
      self->log->event(line);
    }
    self->usage_busy = false;
  });
}

void HttpServer::State::flush_log_periodically() {
  if (config.access_log_flush_ms == 0) {
    return;
  }
  log_flush_timer.expires_after(std::chrono::milliseconds(config.access_log_flush_ms));
  log_flush_timer.async_wait([self = shared_from_this()](boost::system::error_code ec) {
    if (ec || self->stopping) {
      return;
    }
    self->log->flush();
    self->flush_log_periodically();
  });
}

}  // namespace opcache::server
