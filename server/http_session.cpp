#include "server/http_session.hpp"

#include <fcntl.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <variant>

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include "remote/bucket_download.hpp"
#include "server/entry_wait.hpp"
#include "server/http_response.hpp"
#include "server/request_dispatch.hpp"

namespace opcache::server {

namespace {

namespace beast = boost::beast;
namespace http = beast::http;
using Clock = std::chrono::steady_clock;
using State = HttpServer::State;
// A TCP stream with the connection's concrete executor (see ConnectionSocket).
using TcpStream = beast::basic_stream<tcp, net::io_context::executor_type, beast::unlimited_rate_policy>;

// What a connection knows of the request it is answering; one value per
// request (Session::read_request starts each with a fresh one).
struct RequestState {
  Route route;
  Identity identity;
  std::string method;
  std::string target;
  std::map<std::string, std::string> query;
  std::string if_none_match;
  std::string op_type_header;                      // X-Opcache-Op-Type (server/usage_stats)
  std::string scenario_header;                     // X-Opcache-Scenario
  DownloadRedirect redirect = DownloadRedirect::no;  // X-Opcache-Redirect: the client follows a 307 to the bucket
  std::shared_ptr<const EntryFacts> served_facts;  // of the entry answered, for the statistics
  std::shared_ptr<const std::vector<FetchedKernel>> fetched;  // a batch fetch's frames, for the statistics
  bool may_read = false;                           // for /ui/: whether the request could read the statistics
  std::string body;
  store::Signatures signatures;  // of an upload (X-Opcache-Signature)
  Clock::time_point started = Clock::now();
  std::uint64_t bytes_in = 0;
  std::uint64_t expected_length = 0;
  bool keep_alive = true;
  bool expect_continue = false;
  bool close_after = false;
  bool body_pending = false;  // request bytes may still arrive unread (see linger_then_close)
};

// One HTTP connection: read a request, route and authorize it from its
// header, read its body (into memory or a temp file), run the handler on the
// worker pool, write the response, repeat while keep-alive. `Derived` provides
// stream(), start() and shutdown() for plain TCP or TLS.
template <class Derived>
class Session : public SessionBase {
 public:
  Session(std::shared_ptr<State> state, std::string client, std::string address)
      : m_state(std::move(state)), m_client(std::move(client)), m_address(std::move(address)) {}
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
  TcpStream& lowest() { return beast::get_lowest_layer(derived().stream()); }

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
    // The target's room outlives its request: a long target costs no
    // allocation per request.
    // A fresh state made in place: assigning a fresh one moved each of its
    // twenty-odd strings and containers, on every request.
    std::string target = std::move(m_request.target);
    std::destroy_at(&m_request);
    std::construct_at(&m_request);
    target.clear();
    m_request.target = std::move(target);
    m_header.emplace();
    m_header->header_limit(m_state->config.max_header_bytes);
    // The header parser must not judge Content-Length: Beast's default request
    // body limit (1 MiB) would fail large uploads before they are routed. The
    // route's own limit is applied once the route is known (read_small_body,
    // read_upload).
    m_header->body_limit(std::numeric_limits<std::uint64_t>::max());
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
  bool body_pending() const { return m_request.body_pending; }

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
    m_request.started = Clock::now();
    lowest().expires_after(std::chrono::seconds(m_state->config.request_timeout_s));
    // The bytes read so far usually hold the whole header: parsing them here
    // skips a read operation and its trip through the I/O loop.
    beast::error_code ec;
    m_buffer.consume(m_header->put(m_buffer.data(), ec));
    if (ec != http::error::need_more) {
      on_header(ec);
      return;
    }
    http::async_read_header(derived().stream(), m_buffer, *m_header,
                            [self = self_pointer()](beast::error_code ec, std::size_t) { self->on_header(ec); });
  }

  void drain() {
    if (!m_discard) {
      // Only a session that lingers needs it: not zeroed, never read.
      m_discard = std::make_unique_for_overwrite<char[]>(k_discard_bytes);
    }
    const auto buffer = net::buffer(m_discard.get(), k_discard_bytes);
    lowest().async_read_some(buffer, [self = self_pointer()](beast::error_code ec, std::size_t) {
      if (ec) {
        // The client closed, or k_linger is over.
        self->lowest().close();
        return;
      }
      self->drain();
    });
  }

  void on_header(beast::error_code ec) {
    if (ec == http::error::header_limit) {
      m_request.method = "-";
      m_request.target = "-";
      m_request.close_after = true;
      m_request.body_pending = true;  // the rest of the header
      respond(
          error_response(431, "header_too_large",
                         "request header larger than " + std::to_string(m_state->config.max_header_bytes) + " bytes"));
      return;
    }
    if (ec) {
      // End of stream, idle timeout, a closed or broken connection, or garbage
      // that is not HTTP: nothing useful can be answered.
      derived().shutdown();
      return;
    }
    auto& request = m_header->get();
    m_request.method = std::string(request.method_string());
    m_request.target.assign(request.target());
    auto routed = route_target(m_request.method, m_request.target);
    const std::string& path = routed.path;
    m_request.query = std::move(routed.parameters);
    m_request.keep_alive = request.keep_alive();
    m_request.expect_continue = beast::iequals(request[http::field::expect], "100-continue");
    m_request.if_none_match = std::string(request[http::field::if_none_match]);
    m_request.op_type_header = std::string(request[k_op_type_header]);
    m_request.scenario_header = std::string(request[k_scenario_header]);
    m_request.redirect = download_redirect(request[remote::k_redirect_header]);
    const bool has_body = m_header->chunked() || m_header->content_length().value_or(0) > 0;
    // Until a body reader has consumed it, a body may be on its way.
    m_request.body_pending = has_body;
    m_request.route = std::move(routed.route);

    if (m_state->stopping) {
      m_request.close_after = true;
      respond(error_response(503, "unavailable", "the server is shutting down"));
      return;
    }
    if (m_request.route.error_status != 0) {
      m_request.close_after = has_body;
      auto response =
          error_response(m_request.route.error_status, m_request.route.error_code, m_request.route.error_message);
      if (!m_request.route.allow.empty()) {
        response.headers.push_back({"Allow", m_request.route.allow});
      }
      respond(std::move(response));
      return;
    }
    auto decision = m_state->current_tokens()->authorize(request[http::field::authorization], m_request.route.scope,
                                                         m_state->config.anonymous_read);
    m_request.identity = std::move(decision.identity);
    m_request.may_read =
        m_request.route.id == RouteId::ui &&
        m_state->current_tokens()
                ->authorize(request[http::field::authorization], Scope::read, m_state->config.anonymous_read)
                .status == 200;
    if (decision.status != 200) {
      m_request.close_after = has_body;
      auto response =
          error_response(decision.status, decision.status == 401 ? "unauthorized" : "forbidden", decision.message);
      if (decision.status == 401) {
        response.headers.push_back({"WWW-Authenticate", "Bearer realm=\"opcache\""});
      }
      respond(std::move(response));
      return;
    }
    if (m_request.route.body == BodyKind::upload && !read_signature_headers(request)) {
      return;
    }
    switch (m_request.route.body) {
      case BodyKind::none:
        if (has_body) {
          m_request.close_after = true;
          respond(error_response(400, "bad_request", m_request.method + " " + path + " takes no request body"));
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

  // The X-Opcache-Signature headers of an upload, into m_request.signatures; false
  // (after answering 400, before the body is read) when one is malformed.
  template <class Request>
  bool read_signature_headers(const Request& request) {
    auto parsed = upload_signatures(request);
    if (!parsed) {
      m_request.close_after = true;
      m_state->metrics.record_rejected_upload("malformed_signature");
      respond(error_response(400, "malformed_signature", parsed.error().message()));
      return false;
    }
    m_request.signatures = std::move(*parsed);
    return true;
  }

  // Answers "Expect: 100-continue" before reading a body we accept.
  template <class Then>
  void continue_then(Then then) {
    if (!m_request.expect_continue) {
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
    const std::size_t limit = small_body_limit(m_request.route.id);
    if (m_header->content_length().value_or(0) > limit) {
      m_request.close_after = true;
      respond(error_response(413, "payload_too_large", "request body larger than " + std::to_string(limit) + " bytes"));
      return;
    }
    m_small.emplace(std::move(*m_header));
    m_small->body_limit(limit);
    continue_then([self = self_pointer()] {
      http::async_read(self->derived().stream(), self->m_buffer, *self->m_small,
                       [self](beast::error_code ec, std::size_t) { self->on_small_body(ec); });
    });
  }

  void on_small_body(beast::error_code ec) {
    if (ec == http::error::body_limit) {
      m_request.close_after = true;
      respond(error_response(413, "payload_too_large",
                             "request body larger than " + std::to_string(small_body_limit(m_request.route.id)) +
                                 " bytes"));
      return;
    }
    if (ec) {
      m_request.body_pending = false;  // a broken or timed-out connection: nothing to answer
      derived().shutdown();
      return;
    }
    m_request.body_pending = false;
    m_request.body = std::move(m_small->get().body());
    m_request.bytes_in = m_request.body.size();
    m_small.reset();
    dispatch();
  }

  void read_upload() {
    const auto length = m_header->content_length();
    if (!length) {
      m_request.close_after = true;
      respond(error_response(411, "length_required",
                             "uploads need a Content-Length header (chunked uploads are not accepted)"));
      return;
    }
    if (*length > m_state->config.max_body_bytes) {
      m_state->metrics.record_rejected_upload("too_large");
      m_request.close_after = true;
      respond(error_response(413, "payload_too_large",
                             "bundle of " + std::to_string(*length) + " bytes is larger than the limit of " +
                                 std::to_string(m_state->config.max_body_bytes)));
      return;
    }
    if (!m_state->acquire_inflight()) {
      m_request.close_after = true;
      respond(too_many_requests());
      return;
    }
    auto upload = m_state->api.create_upload();
    if (!upload) {
      m_state->release_inflight();
      m_request.close_after = true;
      auto refused = error_response(503, "unavailable", "the server cannot take an upload now; its log says why");
      refused.log_detail = "no temp file for an upload: " + upload.error().message();
      respond(std::move(refused));
      return;
    }
    m_request.expected_length = *length;
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
      m_request.close_after = true;
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
        m_request.close_after = true;
        respond(error_response(413, "payload_too_large", "bundle larger than the limit"));
        return;
      }
      m_request.body_pending = false;  // a broken or timed-out connection: nothing to answer
      log_request(0, 0);
      derived().shutdown();
      return;
    }
    m_request.body_pending = false;
    m_request.bytes_in = m_request.expected_length;
    auto upload = std::make_shared<base::AtomicFile>(std::move(*m_upload));
    m_upload.reset();
    dispatch(std::move(upload), /*holding_inflight=*/true);
  }

  // Runs the route's handler (server/routes.hpp) on the request read: in
  // place, on a worker or after a wait, as plan_call says. `upload` is an
  // upload's body; `holding_inflight` when it holds an in-flight slot.
  void dispatch(std::shared_ptr<base::AtomicFile> upload = nullptr, bool holding_inflight = false) {
    ApiRequest request{m_request.route,         m_request.method,          m_request.query,
                       m_request.if_none_match, std::move(m_request.body), m_request.identity.name,
                       m_request.may_read,      std::move(upload),         std::move(m_request.signatures),
                       m_request.redirect};
    auto call = plan_call(m_state->api, m_state->config, m_state->storage->reads_are_local(), std::move(request));
    if (call.wait.count() > 0) {
      wait_for_entry(m_state, derived().stream().get_executor(), std::move(call), m_request.route.key,
                     [self = self_pointer()](ApiResponse response) {
                       // The wait is not part of --request-timeout: the answer gets its own.
                       self->lowest().expires_after(std::chrono::seconds(self->m_state->config.request_timeout_s));
                       self->respond(std::move(response));
                     });
    } else if (call.on_io_thread) {
      // Answering here costs less than the hop to a worker and back, and
      // needs no in-flight slot (those bound the worker queue).
      if (holding_inflight) {
        m_state->release_inflight();
      }
      respond(call.run());
    } else {
      run_on_worker(std::move(call.run), holding_inflight);
    }
  }

  ApiResponse too_many_requests() {
    auto response = error_response(
        429, "too_many_requests",
        "more than " + std::to_string(m_state->config.max_inflight) + " requests in progress; retry shortly");
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
    // `home` counts as work of this connection's I/O context until the
    // answer is posted back: during a graceful stop, a context whose only
    // work is on the pool would otherwise return from run() and never send it.
    auto home = net::prefer(derived().stream().get_executor(), net::execution::outstanding_work.tracked);
    net::post(m_state->workers, [self = self_pointer(), handler = std::move(handler), home]() mutable {
      auto response = std::make_shared<ApiResponse>(handler());
      self->m_state->release_inflight();
      net::post(home, [self, response] { self->respond(std::move(*response)); });
    });
  }

  void respond(ApiResponse response) {
    const bool close = m_request.close_after || !m_request.keep_alive || m_state->stopping;
    const bool head = m_request.method == "HEAD";
    if (response.bundle) {
      m_request.served_facts = response.bundle->facts;
    }
    m_request.fetched = std::move(response.fetched);
    if (!response.log_detail.empty()) {
      m_state->log->event(m_request.method + " " + m_request.target + ": " + response.log_detail);
    }
    auto outgoing = to_message(std::move(response), head, close, std::move(m_spare_rendered));
    // Counted as it is answered, not once it is written: a client that has
    // its answer then finds it in /v1/stats (another connection may ask first).
    record_usage(outgoing.status, outgoing.bytes_out);
    std::visit([&](auto message) { write(std::move(message), outgoing.status, outgoing.bytes_out, close); },
               std::move(outgoing.message));
  }

  // A rendered bundle response: its head and bytes in one gather write, or
  // on plain HTTP (TLS encrypts in user space) the head then the file by
  // sendfile(2) when it has one.
  void write(std::shared_ptr<RenderedBundleResponse> rendered, int status, std::uint64_t bytes_out, bool close) {
    std::size_t head_sent = 0;
    std::size_t body_sent = 0;
    if (Derived::k_sends_files &&
        (rendered->file ? send_without_copy(*rendered, head_sent, body_sent)
                        : send_from_memory(*rendered, head_sent, body_sent))) {
      keep_spare(std::move(rendered));
      written_at_once(status, bytes_out, close);
      return;
    }
    // What is left (everything without a file), from memory, under the
    // connection's timeout.
    auto buffers = rendered->buffers();
    buffers[0] += head_sent;
    buffers[1] += body_sent;
    net::async_write(derived().stream(), buffers,
                     [self = self_pointer(), rendered, status, bytes_out, close](beast::error_code ec,
                                                                                 std::size_t) mutable {
                       self->keep_spare(std::move(rendered));
                       self->on_written(ec, status, bytes_out, close);
                     });
  }

  // Keeps a written response's head for the next bundle response of this
  // connection (to_message renders into it), without its bytes and file.
  void keep_spare(std::shared_ptr<RenderedBundleResponse> rendered) {
    rendered->body.reset();
    rendered->file.reset();
    m_spare_rendered = std::move(rendered);
  }

  // Sends what the socket takes now without blocking of a response held in
  // memory: head and bytes in one sendmsg(2). True when all of it went; else
  // `head_sent` and `body_sent` say how far it got, and the rest goes by an
  // asynchronous write (which reports an error). A small GET's answer almost
  // always fits the socket buffer, and sending it here skips an asynchronous
  // write's operation, its timer and its completion's trip through the I/O
  // loop: ~2,700 of a small GET's ~24,500 instructions (issue 39).
  bool send_from_memory(const RenderedBundleResponse& rendered, std::size_t& head_sent, std::size_t& body_sent) {
    auto& socket = lowest().socket();
    const int fd = socket.native_handle();
    const std::size_t body_size = rendered.body ? rendered.body->size() : 0;
    while (head_sent < rendered.head.size() || body_sent < body_size) {
      std::array<iovec, 2> pieces{};
      std::size_t count = 0;
      if (head_sent < rendered.head.size()) {
        pieces[count++] = {const_cast<char*>(rendered.head.data()) + head_sent, rendered.head.size() - head_sent};
      }
      if (body_sent < body_size) {
        pieces[count++] = {const_cast<char*>(rendered.body->data()) + body_sent, body_size - body_sent};
      }
      msghdr message{};
      message.msg_iov = pieces.data();
      message.msg_iovlen = count;
      const ssize_t sent = ::sendmsg(fd, &message, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (sent < 0 && errno == EINTR) {
        continue;
      }
      if (sent <= 0) {
        return false;  // a full socket buffer, or an error the asynchronous write reports
      }
      auto left = static_cast<std::size_t>(sent);
      const std::size_t to_head = std::min(left, rendered.head.size() - head_sent);
      head_sent += to_head;
      body_sent += left - to_head;
    }
    return true;
  }

  // Sends what the socket takes now without blocking: the head (held back by
  // MSG_MORE to leave with the file's first bytes), then the file by
  // sendfile(2). True when all of it went; else `head_sent` and `body_sent`
  // say how far it got (a full socket buffer, or an error the write of the
  // rest reports).
  bool send_without_copy(const RenderedBundleResponse& rendered, std::size_t& head_sent, std::size_t& body_sent) {
    auto& socket = lowest().socket();
    beast::error_code ec;
    if (!socket.native_non_blocking()) {
      socket.native_non_blocking(true, ec);
      if (ec) {
        return false;
      }
    }
    const int fd = socket.native_handle();
    while (head_sent < rendered.head.size()) {
      const ssize_t sent = ::send(fd, rendered.head.data() + head_sent, rendered.head.size() - head_sent,
                                  MSG_MORE | MSG_NOSIGNAL | MSG_DONTWAIT);
      if (sent > 0) {
        head_sent += static_cast<std::size_t>(sent);
      } else if (!(sent < 0 && errno == EINTR)) {
        return false;
      }
    }
    const std::size_t size = rendered.body->size();
    off_t offset = 0;
    while (static_cast<std::size_t>(offset) < size) {
      const ssize_t sent = ::sendfile(fd, rendered.file->get(), &offset, size - static_cast<std::size_t>(offset));
      if (sent <= 0 && !(sent < 0 && errno == EINTR)) {
        break;  // a full buffer, a shorter file or an error: the rest from memory
      }
    }
    body_sent = static_cast<std::size_t>(offset);
    return body_sent == size;
  }

  // A bundle streamed from its file (too large to keep in memory): on plain
  // HTTP its head then the file by sendfile(2) as far as the socket takes
  // them, and when the socket buffer is full one piece from the file under
  // the connection's timeout, then sendfile again (send_file_rest). Beast's
  // serializer copied every byte through user space: 1 MiB bundles were
  // served at 0.6x nginx's rate (issue 39). TLS encrypts in user space.
  void write(std::shared_ptr<http::response<BundleFileBody>> message, int status, std::uint64_t bytes_out, bool close) {
    if constexpr (!Derived::k_sends_files) {
      write_message(std::move(message), status, bytes_out, close);
    } else {
      auto sending = std::make_shared<FileSending>();
      std::ostringstream head;
      head << message->base();
      sending->head = std::move(head).str();
      sending->size = message->body().size;
      sending->message = std::move(message);
      send_file_rest(std::move(sending), status, bytes_out, close);
    }
  }

  template <class Message>
  void write(std::shared_ptr<Message> message, int status, std::uint64_t bytes_out, bool close) {
    write_message(std::move(message), status, bytes_out, close);
  }

  // What send_file_rest has sent of a streamed bundle's response.
  struct FileSending {
    std::shared_ptr<http::response<BundleFileBody>> message;  // holds the open file
    std::string head;
    std::size_t head_sent = 0;
    std::uint64_t size = 0;
    off_t offset = 0;               // of the file, sent
    std::unique_ptr<char[]> piece;  // the piece from the file when the socket was full
  };

  void send_file_rest(std::shared_ptr<FileSending> sending, int status, std::uint64_t bytes_out, bool close) {
    auto& socket = lowest().socket();
    const int fd = socket.native_handle();
    const int file = sending->message->body().fd.get();
    beast::error_code ec;
    if (!socket.native_non_blocking()) {
      socket.native_non_blocking(true, ec);
    }
    while (!ec && sending->head_sent < sending->head.size()) {
      const ssize_t sent = ::send(fd, sending->head.data() + sending->head_sent,
                                  sending->head.size() - sending->head_sent, MSG_MORE | MSG_NOSIGNAL | MSG_DONTWAIT);
      if (sent > 0) {
        sending->head_sent += static_cast<std::size_t>(sent);
      } else if (!(sent < 0 && errno == EINTR)) {
        break;
      }
    }
    while (!ec && sending->head_sent == sending->head.size() &&
           static_cast<std::uint64_t>(sending->offset) < sending->size) {
      const ssize_t sent =
          ::sendfile(fd, file, &sending->offset, sending->size - static_cast<std::uint64_t>(sending->offset));
      if (sent <= 0 && !(sent < 0 && errno == EINTR)) {
        break;  // a full buffer, a shorter file or an error: the next piece goes the slow way, which reports it
      }
    }
    if (sending->head_sent == sending->head.size() && static_cast<std::uint64_t>(sending->offset) == sending->size) {
      written_at_once(status, bytes_out, close);
      return;
    }
    // The socket is full (or failing): wait for it under the connection's
    // timeout, writing what is left of the head or the next piece of the file.
    net::const_buffer rest;
    if (sending->head_sent < sending->head.size()) {
      rest = net::buffer(sending->head) + sending->head_sent;
    } else {
      const auto length = static_cast<std::size_t>(
          std::min<std::uint64_t>(k_bundle_write_bytes, sending->size - static_cast<std::uint64_t>(sending->offset)));
      if (!sending->piece) {
        sending->piece = std::make_unique<char[]>(k_bundle_write_bytes);
      }
      std::size_t got = 0;
      while (got < length) {
        const ssize_t read =
            ::pread(file, sending->piece.get() + got, length - got, sending->offset + static_cast<off_t>(got));
        if (read < 0 && errno == EINTR) {
          continue;
        }
        if (read <= 0) {
          // A shorter file than its size: the answer cannot be finished.
          on_written(beast::error_code(read < 0 ? errno : EIO, beast::system_category()), status, bytes_out, close);
          return;
        }
        got += static_cast<std::size_t>(read);
      }
      rest = net::buffer(sending->piece.get(), length);
    }
    net::async_write(derived().stream(), rest,
                     [self = self_pointer(), sending, status, bytes_out, close](beast::error_code ec, std::size_t n) {
                       if (ec) {
                         self->on_written(ec, status, bytes_out, close);
                         return;
                       }
                       if (sending->head_sent < sending->head.size()) {
                         sending->head_sent += n;
                       } else {
                         sending->offset += static_cast<off_t>(n);
                       }
                       self->send_file_rest(sending, status, bytes_out, close);
                     });
  }

  template <class Message>
  void write_message(std::shared_ptr<Message> message, int status, std::uint64_t bytes_out, bool close) {
    http::async_write(derived().stream(), *message,
                      [self = self_pointer(), message, status, bytes_out, close](beast::error_code ec, std::size_t) {
                        self->on_written(ec, status, bytes_out, close);
                      });
  }

  // After a response is written (or failed to be): log it, then close or
  // read the next request.
  void on_written(beast::error_code ec, int status, std::uint64_t bytes_out, bool close) {
    log_request(status, ec ? 0 : bytes_out);
    if (ec || close) {
      derived().shutdown();
      return;
    }
    if (m_inline_depth > k_max_inline_depth) {
      // Pipelined requests answered at once would each call the next one's
      // handling from within its own: let the stack unwind now and then.
      net::post(derived().stream().get_executor(), [self = self_pointer()] { self->read_request(); });
      return;
    }
    read_request();
  }

  // on_written for a response sent whole without waiting (send_from_memory,
  // send_without_copy): the next pipelined request is then read and answered
  // from within this call, m_inline_depth deep.
  void written_at_once(int status, std::uint64_t bytes_out, bool close) {
    ++m_inline_depth;
    on_written({}, status, bytes_out, close);
    --m_inline_depth;
  }

  void log_request(int status, std::uint64_t bytes_out) {
    const double seconds = std::chrono::duration<double>(Clock::now() - m_request.started).count();
    m_state->metrics.record_request(m_request.route.id, m_request.method, status, seconds, m_request.bytes_in,
                                    bytes_out);
    AccessRecord record;
    record.client = m_client;
    record.method = m_request.method;
    record.target = m_request.target;
    record.status = status;
    record.bytes_in = m_request.bytes_in;
    record.bytes_out = bytes_out;
    record.seconds = seconds;
    record.token_name = m_request.identity.name;
    m_state->log->write(record);
  }

  void record_usage(int status, std::uint64_t bytes_out) {
    UsageEvent event;
    event.route = m_request.route.id;
    event.method = m_request.method;
    event.status = status;
    event.bytes_in = m_request.bytes_in;
    event.bytes_out = bytes_out;
    event.token_name = m_request.identity.name;
    event.client = m_address;
    event.key = m_request.route.key;
    event.facts = m_request.served_facts.get();
    event.op_type_header = m_request.op_type_header;
    event.scenario_header = m_request.scenario_header;
    if (m_request.fetched) {
      event.fetched = *m_request.fetched;
    }
    m_state->api.usage().record(event);
  }

  // How many responses sent at once (written_at_once) are on the stack.
  static constexpr int k_max_inline_depth = 16;
  int m_inline_depth = 0;
  // The last bundle response written, for to_message to reuse (keep_spare).
  std::shared_ptr<RenderedBundleResponse> m_spare_rendered;
  std::string m_client;   // "address:port", for the access log
  std::string m_address;  // the client's address, for the usage statistics
  std::optional<http::request_parser<http::empty_body>> m_header;
  std::optional<http::request_parser<http::string_body>> m_small;
  std::optional<http::request_parser<http::file_body>> m_upload_parser;
  std::optional<base::AtomicFile> m_upload;
  std::atomic<bool> m_idle{false};
  static constexpr std::size_t k_discard_bytes = 16 * 1024;
  std::unique_ptr<char[]> m_discard;  // what linger_then_close reads and drops (allocated when it lingers)

  RequestState m_request;
};

class PlainSession final : public Session<PlainSession> {
 public:
  /// Large bundles go out by sendfile(2).
  static constexpr bool k_sends_files = true;

  PlainSession(std::shared_ptr<State> state, ConnectionSocket socket, std::string client, std::string address)
      : Session(std::move(state), std::move(client), std::move(address)), m_stream(std::move(socket)) {}

  TcpStream& stream() { return m_stream; }
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
  TcpStream m_stream;
};

class TlsSession final : public Session<TlsSession> {
 public:
  /// TLS encrypts in user space: no sendfile.
  static constexpr bool k_sends_files = false;

  TlsSession(std::shared_ptr<State> state, ConnectionSocket socket, std::shared_ptr<ssl::context> context,
             std::string client, std::string address)
      : Session(std::move(state), std::move(client), std::move(address)),
        m_context(std::move(context)),
        m_stream(std::move(socket), *m_context) {}

  beast::ssl_stream<TcpStream>& stream() { return m_stream; }

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
  beast::ssl_stream<TcpStream> m_stream;
};

}  // namespace

void start_session(const std::shared_ptr<State>& state, ConnectionSocket socket) {
  beast::error_code ignored;
  // Responses are written in pieces; without TCP_NODELAY the last small
  // piece waits for the client's delayed ACK (~40 ms per response).
  socket.set_option(tcp::no_delay(true), ignored);
  auto remote = socket.remote_endpoint(ignored);
  std::string address = remote.address().to_string();
  std::string client = address + ":" + std::to_string(remote.port());
  // The socket belongs to the I/O thread it was handed to (not necessarily
  // the acceptor's): the session starts there, so only that thread ever
  // touches it.
  auto executor = socket.get_executor();
  if (state->config.tls()) {
    auto session = std::make_shared<TlsSession>(state, std::move(socket), state->current_tls(), client, address);
    state->add_session(session);
    net::dispatch(executor, [session] { session->start(); });
  } else {
    auto session = std::make_shared<PlainSession>(state, std::move(socket), client, address);
    state->add_session(session);
    net::dispatch(executor, [session] { session->start(); });
  }
}

}  // namespace opcache::server
