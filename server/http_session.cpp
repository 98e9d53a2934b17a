#include "server/http_server.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include "opcache/version.hpp"
#include "server/access_log.hpp"
#include "server/api.hpp"
#include "server/metrics.hpp"

namespace opcache::server {

namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

const std::string k_server_header = std::string("opcache/") + k_version_string;

// Anything a session may be asked to do from outside its own strand.
class SessionBase : public std::enable_shared_from_this<SessionBase> {
 public:
  virtual ~SessionBase() = default;
  /// Closes the connection if it is waiting for a request (graceful stop).
  virtual void close_if_idle() = 0;
};

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

}  // namespace

// Everything the listeners and sessions share. Lives as long as any of them.
struct HttpServer::State : std::enable_shared_from_this<HttpServer::State> {
  State(ServerConfig config_in, std::unique_ptr<Storage> storage_in, TokenTable tokens_in)
      : config(std::move(config_in)),
        storage(std::move(storage_in)),
        api(*storage, metrics, config),
        tokens(std::make_shared<const TokenTable>(std::move(tokens_in))),
        workers(static_cast<std::size_t>(config.workers)),
        signals(ioc, SIGTERM, SIGINT, SIGHUP),
        shutdown_timer(ioc) {}

  ServerConfig config;
  std::unique_ptr<Storage> storage;
  Metrics metrics;
  Api api;
  std::optional<AccessLog> log;

  std::mutex auth_mutex;
  std::shared_ptr<const TokenTable> tokens;
  std::shared_ptr<ssl::context> tls;

  net::io_context ioc;
  net::thread_pool workers;
  net::signal_set signals;
  net::steady_timer shutdown_timer;
  std::vector<std::shared_ptr<tcp::acceptor>> acceptors;

  std::atomic<bool> stopping{false};
  std::atomic<int> inflight{0};

  std::mutex sessions_mutex;
  std::unordered_map<SessionBase*, std::weak_ptr<SessionBase>> sessions;

  std::shared_ptr<const TokenTable> current_tokens() {
    std::lock_guard lock(auth_mutex);
    return tokens;
  }
  std::shared_ptr<ssl::context> current_tls() {
    std::lock_guard lock(auth_mutex);
    return tls;
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
    std::lock_guard lock(sessions_mutex);
    sessions[session.get()] = session;
  }

  void remove_session(SessionBase* session) {
    bool last = false;
    {
      std::lock_guard lock(sessions_mutex);
      sessions.erase(session);
      last = sessions.empty();
    }
    if (last && stopping) {
      // Nothing in flight any more: end the grace period early.
      net::post(ioc, [self = shared_from_this()] { self->shutdown_timer.cancel(); });
    }
  }

  void reload() {
    if (!config.tokens_file.empty()) {
      auto loaded = TokenTable::load(config.tokens_file);
      if (loaded) {
        std::lock_guard lock(auth_mutex);
        tokens = std::make_shared<const TokenTable>(std::move(*loaded));
        log->event("reloaded " + std::to_string(tokens->size()) + " tokens from " + config.tokens_file.string());
      } else {
        log->event("tokens not reloaded, keeping the old ones: " + loaded.error().message());
      }
    }
    if (config.tls()) {
      auto loaded = load_tls_context(config);
      if (loaded) {
        std::lock_guard lock(auth_mutex);
        tls = *loaded;
        log->event("reloaded the TLS certificate " + config.tls_cert.string());
      } else {
        log->event("TLS certificate not reloaded, keeping the old one: " + loaded.error().message());
      }
    }
  }

  void begin_stop() {
    if (stopping.exchange(true)) {
      return;
    }
    log->event("stopping: finishing requests in flight (up to " + std::to_string(config.shutdown_grace_s) + " s)");
    boost::system::error_code ignored;
    signals.cancel(ignored);
    for (auto& acceptor : acceptors) {
      acceptor->close(ignored);
    }
    std::vector<std::shared_ptr<SessionBase>> live;
    {
      std::lock_guard lock(sessions_mutex);
      for (auto& [pointer, weak] : sessions) {
        if (auto session = weak.lock()) {
          live.push_back(session);
        }
      }
    }
    for (auto& session : live) {
      session->close_if_idle();
    }
    if (live.empty()) {
      return;
    }
    shutdown_timer.expires_after(std::chrono::seconds(config.shutdown_grace_s));
    shutdown_timer.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (!ec) {
        self->log->event("grace period over: closing the remaining connections");
        self->ioc.stop();
      }
    });
  }

  void wait_for_signal() {
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
};

namespace {

using State = HttpServer::State;

// One HTTP connection: read a request, route and authorize it from its
// header, read its body (into memory or a temp file), run the handler on the
// worker pool, write the response, repeat while keep-alive. `Derived` provides
// stream(), start() and shutdown() for plain TCP or TLS.
template <class Derived>
class Session : public SessionBase {
 public:
  Session(std::shared_ptr<State> state, std::string client) : m_state(std::move(state)), m_client(std::move(client)) {}
  ~Session() override { m_state->remove_session(this); }

  void close_if_idle() override {
    net::post(derived().stream().get_executor(), [self = self_pointer()] {
      if (self->m_idle) {
        beast::get_lowest_layer(self->derived().stream()).cancel();
      }
    });
  }

 protected:
  Derived& derived() { return static_cast<Derived&>(*this); }
  std::shared_ptr<Derived> self_pointer() { return std::static_pointer_cast<Derived>(shared_from_this()); }
  beast::tcp_stream& lowest() { return beast::get_lowest_layer(derived().stream()); }

  // Waits (up to --idle-timeout) for the first byte of the next request, then
  // reads its header. A request that has begun must arrive whole within
  // --request-timeout: the deadline is set once, at its first byte, and not
  // moved by later bytes, so a client trickling a header or a body (slowloris)
  // cannot hold the connection longer than that.
  void read_request() {
    if (m_state->stopping) {
      derived().shutdown();
      return;
    }
    m_header.emplace();
    m_header->header_limit(m_state->config.max_header_bytes);
    // The header parser must not judge Content-Length: Beast's default request
    // body limit (1 MiB) would fail large uploads before they are routed. The
    // route's own limit is applied once the route is known (read_small_body,
    // read_upload).
    m_header->body_limit(std::numeric_limits<std::uint64_t>::max());
    m_body_pending = false;
    if (m_buffer.size() > 0) {
      read_header();  // a pipelined request has already begun
      return;
    }
    m_idle = true;
    lowest().expires_after(std::chrono::seconds(m_state->config.idle_timeout_s));
    derived().stream().async_read_some(m_buffer.prepare(k_first_read_bytes),
                                       [self = self_pointer()](beast::error_code ec, std::size_t bytes) {
                                         self->on_first_bytes(ec, bytes);
                                       });
  }

  // Closes the connection after a response that was sent before the request
  // was read completely. Closing a socket with unread input makes the kernel
  // answer with a reset, which can destroy the response before the client has
  // read it; so stop sending, then read and discard what the client still
  // sends until it closes, for at most k_linger.
  void linger_then_close() {
    beast::error_code ignored;
    lowest().socket().shutdown(tcp::socket::shutdown_send, ignored);
    lowest().expires_after(k_linger);
    drain();
  }

  /// Whether the client may still be sending a request the server did not read.
  bool body_pending() const { return m_body_pending; }

  beast::flat_buffer m_buffer;
  std::shared_ptr<State> m_state;

 private:
  static constexpr std::size_t k_first_read_bytes = 16 * 1024;
  static constexpr auto k_linger = std::chrono::seconds(2);

  void on_first_bytes(beast::error_code ec, std::size_t bytes) {
    m_idle = false;
    if (ec) {
      // Idle timeout, end of stream, or closed for a graceful stop.
      derived().shutdown();
      return;
    }
    m_buffer.commit(bytes);
    read_header();
  }

  void read_header() {
    m_started = Clock::now();
    lowest().expires_after(std::chrono::seconds(m_state->config.request_timeout_s));
    http::async_read_header(derived().stream(), m_buffer, *m_header,
                            [self = self_pointer()](beast::error_code ec, std::size_t) { self->on_header(ec); });
  }

  void drain() {
    lowest().async_read_some(net::buffer(m_discard), [self = self_pointer()](beast::error_code ec, std::size_t) {
      if (ec) {
        // The client closed, or k_linger is over.
        self->lowest().close();
        return;
      }
      self->drain();
    });
  }

  void on_header(beast::error_code ec) {
    m_bytes_in = 0;
    m_close_after = false;
    m_route = Route{};
    m_identity = Identity{};
    if (ec == http::error::header_limit) {
      m_method = "-";
      m_target = "-";
      m_close_after = true;
      m_body_pending = true;  // the rest of the header
      respond(error_response(431, "header_too_large",
                             "request header larger than " + std::to_string(m_state->config.max_header_bytes) +
                                 " bytes"));
      return;
    }
    if (ec) {
      // End of stream, idle timeout, a closed or broken connection, or garbage
      // that is not HTTP: nothing useful can be answered.
      derived().shutdown();
      return;
    }
    auto& request = m_header->get();
    m_method = std::string(request.method_string());
    m_target = std::string(request.target());
    auto routed = route_target(m_method, m_target);
    const std::string& path = routed.path;
    m_query = std::move(routed.parameters);
    m_keep_alive = request.keep_alive();
    m_expect_continue = beast::iequals(request[http::field::expect], "100-continue");
    const bool has_body = m_header->chunked() || m_header->content_length().value_or(0) > 0;
    // Until a body reader has consumed it, a body may be on its way.
    m_body_pending = has_body;
    m_route = std::move(routed.route);

    if (m_state->stopping) {
      m_close_after = true;
      respond(error_response(503, "unavailable", "the server is shutting down"));
      return;
    }
    if (m_route.error_status != 0) {
      m_close_after = has_body;
      auto response = error_response(m_route.error_status, m_route.error_code, m_route.error_message);
      if (!m_route.allow.empty()) {
        response.headers.push_back({"Allow", m_route.allow});
      }
      respond(std::move(response));
      return;
    }
    auto decision = m_state->current_tokens()->authorize(request[http::field::authorization], m_route.scope,
                                                         m_state->config.anonymous_read);
    m_identity = decision.identity;
    if (decision.status != 200) {
      m_close_after = has_body;
      auto response = error_response(decision.status, decision.status == 401 ? "unauthorized" : "forbidden",
                                     decision.message);
      if (decision.status == 401) {
        response.headers.push_back({"WWW-Authenticate", "Bearer realm=\"opcache\""});
      }
      respond(std::move(response));
      return;
    }
    switch (m_route.body) {
      case BodyKind::none:
        if (has_body) {
          m_close_after = true;
          respond(error_response(400, "bad_request", m_method + " " + path + " takes no request body"));
          return;
        }
        dispatch();
        return;
      case BodyKind::small:
        read_small_body();
        return;
      case BodyKind::upload:
        read_upload();
        return;
    }
  }

  // Answers "Expect: 100-continue" before reading a body we accept.
  template <class Then>
  void continue_then(Then then) {
    if (!m_expect_continue) {
      then();
      return;
    }
    auto interim = std::make_shared<http::response<http::empty_body>>(http::status::continue_, 11);
    http::async_write(derived().stream(), *interim,
                      [self = self_pointer(), interim, then](beast::error_code ec, std::size_t) {
                        if (ec) {
                          self->derived().shutdown();
                          return;
                        }
                        then();
                      });
  }

  void read_small_body() {
    if (m_header->content_length().value_or(0) > k_small_body_limit) {
      m_close_after = true;
      respond(error_response(413, "payload_too_large",
                             "request body larger than " + std::to_string(k_small_body_limit) + " bytes"));
      return;
    }
    m_small.emplace(std::move(*m_header));
    m_small->body_limit(k_small_body_limit);
    continue_then([self = self_pointer()] {
      http::async_read(self->derived().stream(), self->m_buffer, *self->m_small,
                       [self](beast::error_code ec, std::size_t) { self->on_small_body(ec); });
    });
  }

  void on_small_body(beast::error_code ec) {
    if (ec == http::error::body_limit) {
      m_close_after = true;
      respond(error_response(413, "payload_too_large",
                             "request body larger than " + std::to_string(k_small_body_limit) + " bytes"));
      return;
    }
    if (ec) {
      m_body_pending = false;  // a broken or timed-out connection: nothing to answer
      derived().shutdown();
      return;
    }
    m_body_pending = false;
    m_body = std::move(m_small->get().body());
    m_bytes_in = m_body.size();
    m_small.reset();
    dispatch();
  }

  void read_upload() {
    const auto length = m_header->content_length();
    if (!length) {
      m_close_after = true;
      respond(error_response(411, "length_required",
                             "uploads need a Content-Length header (chunked uploads are not accepted)"));
      return;
    }
    if (*length > m_state->config.max_body_bytes) {
      m_state->metrics.record_rejected_upload("too_large");
      m_close_after = true;
      respond(error_response(413, "payload_too_large",
                             "bundle of " + std::to_string(*length) + " bytes is larger than the limit of " +
                                 std::to_string(m_state->config.max_body_bytes)));
      return;
    }
    if (!m_state->acquire_inflight()) {
      m_close_after = true;
      respond(too_many_requests());
      return;
    }
    auto upload = m_state->api.create_upload();
    if (!upload) {
      m_state->release_inflight();
      m_close_after = true;
      respond(error_response(503, "unavailable", upload.error().message()));
      return;
    }
    m_expected_length = *length;
    m_upload.emplace(std::move(*upload));
    m_upload_parser.emplace(std::move(*m_header));
    m_upload_parser->body_limit(m_state->config.max_body_bytes);
    beast::error_code ec;
    const int fd = ::dup(m_upload->fd());
    if (fd < 0) {
      ec = beast::error_code(errno, boost::system::generic_category());
    } else {
      beast::file file;
      file.native_handle(fd);
      m_upload_parser->get().body().reset(std::move(file), ec);
    }
    if (ec) {
      m_upload_parser.reset();
      m_upload.reset();
      m_state->release_inflight();
      m_close_after = true;
      respond(error_response(503, "unavailable", "cannot write the upload's temp file: " + ec.message()));
      return;
    }
    continue_then([self = self_pointer()] {
      http::async_read(self->derived().stream(), self->m_buffer, *self->m_upload_parser,
                       [self](beast::error_code ec, std::size_t) { self->on_upload(ec); });
    });
  }

  void on_upload(beast::error_code ec) {
    m_upload_parser.reset();  // closes our descriptor of the temp file
    if (ec) {
      // Truncated, abandoned or too slow: the temp file goes away with m_upload,
      // so nothing partial is ever visible.
      m_state->release_inflight();
      m_upload.reset();
      m_state->metrics.record_rejected_upload(ec == http::error::body_limit ? "too_large" : "incomplete");
      if (ec == http::error::body_limit) {
        m_close_after = true;
        respond(error_response(413, "payload_too_large", "bundle larger than the limit"));
        return;
      }
      m_body_pending = false;  // a broken or timed-out connection: nothing to answer
      log_request(0, 0);
      derived().shutdown();
      return;
    }
    m_body_pending = false;
    m_bytes_in = m_expected_length;
    auto upload = std::make_shared<base::AtomicFile>(std::move(*m_upload));
    m_upload.reset();
    run_on_worker([self = self_pointer(), upload] { return self->m_state->api.put_entry(self->m_route.key, std::move(*upload)); },
                  /*holding_inflight=*/true);
  }

  void dispatch() {
    const auto& name = m_route.name;
    if (name == "healthz") {
      respond(m_state->api.healthz());
      return;
    }
    auto self = self_pointer();
    if (name == "entry" && m_method == "DELETE") {
      run_on_worker([self] { return self->m_state->api.delete_entry(self->m_route.key); });
    } else if (name == "entry") {
      std::string if_none_match(m_header->get()[http::field::if_none_match]);
      run_on_worker([self, if_none_match] {
        return self->m_state->api.get_entry(self->m_route.key, self->m_method == "HEAD", if_none_match);
      });
    } else if (name == "query") {
      run_on_worker([self] { return self->m_state->api.query(self->m_body); });
    } else if (name == "list") {
      run_on_worker([self] { return self->m_state->api.list(self->m_query); });
    } else if (name == "status") {
      run_on_worker([self] { return self->m_state->api.status(); });
    } else if (name == "metrics") {
      run_on_worker([self] { return self->m_state->api.metrics(); });
    } else {
      respond(error_response(500, "internal", "no handler for route " + name));
    }
  }

  ApiResponse too_many_requests() {
    auto response = error_response(429, "too_many_requests",
                                   "more than " + std::to_string(m_state->config.max_inflight) +
                                       " requests in progress; retry shortly");
    response.headers.push_back({"Retry-After", "1"});
    return response;
  }

  // Runs a handler on the worker pool (storage work may block) and responds
  // on this session's strand.
  template <class Handler>
  void run_on_worker(Handler handler, bool holding_inflight = false) {
    if (!holding_inflight && !m_state->acquire_inflight()) {
      respond(too_many_requests());
      return;
    }
    net::post(m_state->workers, [self = self_pointer(), handler = std::move(handler)]() mutable {
      auto response = std::make_shared<ApiResponse>(handler());
      self->m_state->release_inflight();
      net::post(self->derived().stream().get_executor(),
                [self, response] { self->respond(std::move(*response)); });
    });
  }

  template <class Body>
  void finish_headers(http::response<Body>& message, const ApiResponse& response, bool close) {
    message.set(http::field::server, k_server_header);
    if (!response.content_type.empty()) {
      message.set(http::field::content_type, response.content_type);
    }
    for (const auto& [name, value] : response.headers) {
      message.set(name, value);
    }
    message.keep_alive(!close);
  }

  // Bundles up to this size are read into memory and sent in one write;
  // larger ones stream from the file.
  static constexpr std::int64_t k_in_memory_bundle_bytes = 1 << 20;

  // The whole bundle, when it is small enough and reads completely.
  static std::optional<std::string> read_small_bundle(const StoredBundle& bundle) {
    if (bundle.size < 0 || bundle.size > k_in_memory_bundle_bytes) {
      return std::nullopt;
    }
    std::string bytes(static_cast<std::size_t>(bundle.size), '\0');
    std::size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t got = ::pread(bundle.fd.get(), bytes.data() + done, bytes.size() - done, static_cast<off_t>(done));
      if (got < 0 && errno == EINTR) {
        continue;
      }
      if (got <= 0) {
        return std::nullopt;  // fall back to streaming, which reports the error
      }
      done += static_cast<std::size_t>(got);
    }
    return bytes;
  }

  void send_bundle_file(ApiResponse response, http::status status, bool close) {
    auto message = std::make_shared<http::response<http::file_body>>(status, 11);
    finish_headers(*message, response, close);
    beast::file file;
    file.native_handle(response.bundle->fd.release());
    beast::error_code ec;
    message->body().reset(std::move(file), ec);
    message->prepare_payload();
    write(message, response.status, static_cast<std::uint64_t>(response.bundle->size), close);
  }

  void respond(ApiResponse response) {
    const bool close = m_close_after || !m_keep_alive || m_state->stopping;
    const bool head = m_method == "HEAD" || response.head_only;
    const auto status = static_cast<http::status>(response.status);
    if (response.bundle && !head && response.status == 200) {
      if (auto bytes = read_small_bundle(*response.bundle)) {
        // One write instead of file_body's 4 KiB pieces.
        response.body = std::move(*bytes);
        response.bundle.reset();
      } else {
        send_bundle_file(std::move(response), status, close);
        return;
      }
    }
    if (head) {
      // The headers a GET would get (Content-Length included), without the body.
      auto header_only = std::make_shared<http::response<http::empty_body>>(status, 11);
      finish_headers(*header_only, response, close);
      if (response.status != 304) {
        header_only->content_length(response.bundle ? static_cast<std::uint64_t>(response.bundle->size)
                                                    : response.body.size());
      }
      write(header_only, response.status, 0, close);
      return;
    }
    auto message = std::make_shared<http::response<http::string_body>>(status, 11);
    finish_headers(*message, response, close);
    message->body() = std::move(response.body);
    if (response.status != 304) {
      message->prepare_payload();
    }
    const auto bytes = message->body().size();
    write(message, response.status, bytes, close);
  }

  template <class Message>
  void write(std::shared_ptr<Message> message, int status, std::uint64_t bytes_out, bool close) {
    http::async_write(derived().stream(), *message,
                      [self = self_pointer(), message, status, bytes_out, close](beast::error_code ec, std::size_t) {
                        self->log_request(status, ec ? 0 : bytes_out);
                        if (ec || close) {
                          self->derived().shutdown();
                          return;
                        }
                        self->read_request();
                      });
  }

  void log_request(int status, std::uint64_t bytes_out) {
    const double seconds = std::chrono::duration<double>(Clock::now() - m_started).count();
    m_state->metrics.record_request(m_route.name, m_method, status, seconds, m_bytes_in, bytes_out);
    AccessRecord record;
    record.client = m_client;
    record.method = m_method;
    record.target = m_target;
    record.status = status;
    record.bytes_in = m_bytes_in;
    record.bytes_out = bytes_out;
    record.seconds = seconds;
    record.token_name = m_identity.name;
    m_state->log->write(record);
  }

  std::string m_client;
  std::optional<http::request_parser<http::empty_body>> m_header;
  std::optional<http::request_parser<http::string_body>> m_small;
  std::optional<http::request_parser<http::file_body>> m_upload_parser;
  std::optional<base::AtomicFile> m_upload;
  std::atomic<bool> m_idle{false};
  bool m_body_pending = false;             // request bytes may still arrive unread (see linger_then_close)
  std::array<char, 16 * 1024> m_discard{};  // what linger_then_close reads and drops

  Route m_route;
  Identity m_identity;
  std::string m_method;
  std::string m_target;
  std::map<std::string, std::string> m_query;
  std::string m_body;
  Clock::time_point m_started = Clock::now();
  std::uint64_t m_bytes_in = 0;
  std::uint64_t m_expected_length = 0;
  bool m_keep_alive = true;
  bool m_expect_continue = false;
  bool m_close_after = false;
};

class PlainSession final : public Session<PlainSession> {
 public:
  PlainSession(std::shared_ptr<State> state, tcp::socket socket, std::string client)
      : Session(std::move(state), std::move(client)), m_stream(std::move(socket)) {}

  beast::tcp_stream& stream() { return m_stream; }
  void start() { read_request(); }
  void shutdown() {
    if (body_pending()) {
      linger_then_close();
      return;
    }
    beast::error_code ec;
    m_stream.socket().shutdown(tcp::socket::shutdown_send, ec);
    m_stream.close();
  }

 private:
  beast::tcp_stream m_stream;
};

class TlsSession final : public Session<TlsSession> {
 public:
  TlsSession(std::shared_ptr<State> state, tcp::socket socket, std::shared_ptr<ssl::context> context,
             std::string client)
      : Session(std::move(state), std::move(client)), m_context(std::move(context)), m_stream(std::move(socket), *m_context) {}

  beast::ssl_stream<beast::tcp_stream>& stream() { return m_stream; }

  void start() {
    beast::get_lowest_layer(m_stream).expires_after(std::chrono::seconds(m_state->config.request_timeout_s));
    m_stream.async_handshake(ssl::stream_base::server, m_buffer.data(),
                             [self = self_pointer()](beast::error_code ec, std::size_t used) {
                               if (ec) {
                                 beast::get_lowest_layer(self->m_stream).close();
                                 return;
                               }
                               self->m_buffer.consume(used);
                               self->read_request();
                             });
  }

  void shutdown() {
    beast::get_lowest_layer(m_stream).expires_after(std::chrono::seconds(5));
    m_stream.async_shutdown([self = self_pointer()](beast::error_code) {
      if (self->body_pending()) {
        self->linger_then_close();  // close_notify is sent; now the TCP level
        return;
      }
      beast::get_lowest_layer(self->m_stream).close();
    });
  }

 private:
  std::shared_ptr<ssl::context> m_context;  // outlives m_stream (declared first)
  beast::ssl_stream<beast::tcp_stream> m_stream;
};

// Accepts connections on one address and starts a session for each.
class Listener : public std::enable_shared_from_this<Listener> {
 public:
  Listener(std::shared_ptr<State> state, std::shared_ptr<tcp::acceptor> acceptor)
      : m_state(std::move(state)), m_acceptor(std::move(acceptor)), m_retry(m_state->ioc) {}

  void accept() {
    m_acceptor->async_accept(net::make_strand(m_state->ioc),
                             [self = shared_from_this()](beast::error_code ec, tcp::socket socket) {
                               self->on_accept(ec, std::move(socket));
                             });
  }

 private:
  void on_accept(beast::error_code ec, tcp::socket socket) {
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
    beast::error_code ignored;
    // Responses are written in pieces; without TCP_NODELAY the last small
    // piece waits for the client's delayed ACK (~40 ms per response).
    socket.set_option(tcp::no_delay(true), ignored);
    auto remote = socket.remote_endpoint(ignored);
    std::string client = remote.address().to_string() + ":" + std::to_string(remote.port());
    if (m_state->config.tls()) {
      auto session = std::make_shared<TlsSession>(m_state, std::move(socket), m_state->current_tls(), client);
      m_state->add_session(session);
      session->start();
    } else {
      auto session = std::make_shared<PlainSession>(m_state, std::move(socket), client);
      m_state->add_session(session);
      session->start();
    }
    accept();
  }

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
  auto log = AccessLog::open(state.config.access_log, state.config.log_format);
  if (!log) {
    return log.error();
  }
  state.log.emplace(std::move(*log));
  if (state.config.tls()) {
    auto tls = load_tls_context(state.config);
    if (!tls) {
      return tls.error();
    }
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
  state.wait_for_signal();
  for (const auto& address : bound) {
    state.log->event(std::string("listening on ") + (state.config.tls() ? "https://" : "http://") + address +
                     " (storage: " + state.storage->describe() + ")");
  }
  return bound;
}

void HttpServer::run() {
  std::vector<std::thread> threads;
  for (int i = 1; i < m_state->config.threads; ++i) {
    threads.emplace_back([state = m_state] { state->ioc.run(); });
  }
  m_state->ioc.run();
  for (auto& thread : threads) {
    thread.join();
  }
  m_state->workers.join();
  m_state->log->event("stopped");
}

void HttpServer::request_stop() {
  net::post(m_state->ioc, [state = m_state] { state->begin_stop(); });
}

}  // namespace opcache::server
