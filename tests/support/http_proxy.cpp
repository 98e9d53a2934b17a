#include "tests/support/http_proxy.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdint>
#include <limits>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <thread>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

namespace opcache::test {

// File-local helpers in a namespace of their own: the tests are compiled in
// unity batches, where anonymous namespaces of several files meet.
namespace http_proxy_detail {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

std::string proxy_lowercase(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

// The parsers' body limit: none (a test's bodies are what they are).
constexpr std::uint64_t k_no_body_limit = std::numeric_limits<std::uint64_t>::max();

struct ProxyBackend {
  std::string host;
  unsigned short port = 0;
};

// "http://host:port", "http://host:port/" or "host:port".
ProxyBackend proxy_parse_backend(const std::string& url) {
  std::string rest = url.rfind("http://", 0) == 0 ? url.substr(7) : url;
  while (!rest.empty() && rest.back() == '/') {
    rest.pop_back();
  }
  const auto colon = rest.rfind(':');
  if (colon == std::string::npos || colon == 0 || rest.find('/') != std::string::npos) {
    throw std::runtime_error("http proxy: backend \"" + url + "\" is not http://HOST:PORT");
  }
  const int port = std::stoi(rest.substr(colon + 1));
  if (port <= 0 || port > 65535) {
    throw std::runtime_error("http proxy: backend \"" + url + "\" has no valid port");
  }
  return {rest.substr(0, colon), static_cast<unsigned short>(port)};
}

bool proxy_rule_matches(const ProxyRule& rule, const ProxiedRequest& request) {
  return (rule.method.empty() || rule.method == request.method) &&
         (rule.target_contains.empty() || request.target.find(rule.target_contains) != std::string::npos) &&
         (rule.header.empty() || request.has_header(proxy_lowercase(rule.header)));
}

struct ProxyCore {
  net::io_context io;  // never run: every operation here is synchronous
  tcp::acceptor acceptor{io};
  std::vector<ProxyBackend> backends;
  int port = 0;
  std::atomic<bool> stopping{false};
  std::atomic<std::size_t> next_backend{0};

  std::mutex mutex;                        // everything below
  std::vector<std::string> strip_headers;  // lowercased
  std::vector<ProxyRule> rules;
  std::vector<ProxiedRequest> requests;
  std::vector<std::uint64_t> serials;  // of `requests`, one each
  std::uint64_t next_serial = 0;
  std::set<int> open_fds;
  std::vector<std::thread> threads;
  std::thread acceptor_thread;

  void track(int fd) {
    std::lock_guard lock(mutex);
    if (stopping) {
      ::shutdown(fd, SHUT_RDWR);  // the destructor has shut the others down already
    }
    open_fds.insert(fd);
  }
  void untrack(int fd) {
    std::lock_guard lock(mutex);
    open_fds.erase(fd);
  }

  void accept_loop() {
    while (!stopping) {
      auto client = std::make_shared<tcp::socket>(io);
      beast::error_code ec;
      acceptor.accept(*client, ec);
      if (ec) {
        if (stopping) {
          return;
        }
        continue;
      }
      std::lock_guard lock(mutex);
      if (stopping) {
        return;
      }
      open_fds.insert(client->native_handle());
      threads.emplace_back([this, client] { serve(*client); });
    }
  }

  // One client connection: read a request, answer it by a rule or forward
  // it, until the client closes or asks to close.
  void serve(tcp::socket& client) {
    Connection connection(*this, client);
    while (!stopping && connection.next()) {
    }
    close_socket(client);
    for (auto& upstream : connection.upstream) {
      if (upstream.socket) {
        close_socket(*upstream.socket);
      }
    }
  }

  void close_socket(tcp::socket& socket) {
    untrack(socket.native_handle());
    beast::error_code ignored;
    socket.shutdown(tcp::socket::shutdown_both, ignored);
    socket.close(ignored);
  }

  // What one request is to do, decided under the lock as it is recorded.
  struct Plan {
    std::uint64_t serial = 0;         // of the request in `requests`
    std::optional<ProxyRule> answer;  // the rule answering it
    std::vector<std::string> strip;   // headers to remove
  };

  Plan record(ProxiedRequest request) {
    std::lock_guard lock(mutex);
    Plan plan;
    for (const auto& rule : rules) {
      if (proxy_rule_matches(rule, request)) {
        plan.answer = rule;
        break;
      }
    }
    plan.strip = strip_headers;
    plan.serial = next_serial++;
    requests.push_back(std::move(request));
    serials.push_back(plan.serial);
    return plan;
  }

  void finish(const Plan& plan, std::size_t backend, int status) {
    std::lock_guard lock(mutex);
    // From the end: it is recent. Absent when clear_requests ran meanwhile.
    for (std::size_t i = serials.size(); i-- > 0;) {
      if (serials[i] == plan.serial) {
        requests[i].backend = backend;
        requests[i].status = status;
        return;
      }
    }
  }

  struct Upstream {
    std::optional<tcp::socket> socket;
    beast::flat_buffer buffer;
  };

  struct Connection {
    Connection(ProxyCore& owner, tcp::socket& accepted)
        : proxy(owner), client(accepted), upstream(owner.backends.size()) {}

    ProxyCore& proxy;
    tcp::socket& client;
    std::vector<Upstream> upstream;
    beast::flat_buffer buffer;

    // Serves one request; false when the connection is over.
    bool next() {
      http::request_parser<http::string_body> parser;
      parser.body_limit(k_no_body_limit);
      parser.header_limit(64 * 1024);
      beast::error_code ec;
      http::read_header(client, buffer, parser, ec);
      if (ec) {
        return false;
      }
      ProxiedRequest seen;
      seen.method = std::string(parser.get().method_string());
      seen.target = std::string(parser.get().target());
      for (const auto& field : parser.get()) {
        seen.headers.emplace_back(proxy_lowercase(std::string(field.name_string())), std::string(field.value()));
      }
      if (beast::iequals(parser.get()[http::field::expect], "100-continue")) {
        static constexpr std::string_view k_continue = "HTTP/1.1 100 Continue\r\n\r\n";
        net::write(client, net::buffer(k_continue.data(), k_continue.size()), ec);
        if (ec) {
          return false;
        }
      }
      http::read(client, buffer, parser, ec);
      if (ec) {
        return false;
      }
      http::request<http::string_body> request = parser.release();
      request.erase(http::field::expect);
      const Plan plan = proxy.record(std::move(seen));
      if (plan.answer) {
        return answer(plan, *plan.answer, request.keep_alive());
      }
      for (const auto& name : plan.strip) {
        request.erase(name);
      }
      return forward(plan, request);
    }

    bool answer(const Plan& plan, const ProxyRule& rule, bool keep_alive) {
      if (rule.status == 0) {
        proxy.finish(plan, ProxiedRequest::k_no_backend, 0);
        return false;  // dropped: serve() closes the connection
      }
      http::response<http::string_body> response{static_cast<http::status>(rule.status), 11};
      response.keep_alive(keep_alive);
      response.prepare_payload();
      beast::error_code ec;
      http::write(client, response, ec);
      proxy.finish(plan, ProxiedRequest::k_no_backend, rule.status);
      return !ec && keep_alive;
    }

    // Sends `request` to the backends in turn from the next one, and its
    // answer to the client.
    bool forward(const Plan& plan, http::request<http::string_body>& request) {
      const std::size_t first = proxy.next_backend.fetch_add(1);
      for (std::size_t attempt = 0; attempt < upstream.size(); ++attempt) {
        const std::size_t index = (first + attempt) % upstream.size();
        std::optional<http::response<http::string_body>> response = exchange(index, request);
        if (!response) {
          continue;
        }
        const bool eof_delimited = response->need_eof();
        const int status = static_cast<int>(response->result_int());
        proxy.finish(plan, index, status);
        beast::error_code ec;
        http::write(client, *response, ec);
        return !ec && !eof_delimited && request.keep_alive();
      }
      http::response<http::string_body> failed{http::status::bad_gateway, 11};
      failed.body() = "http proxy: no backend answered\n";
      failed.keep_alive(request.keep_alive());
      failed.prepare_payload();
      beast::error_code ec;
      http::write(client, failed, ec);
      proxy.finish(plan, ProxiedRequest::k_no_backend, 502);
      return !ec && request.keep_alive();
    }

    // One request to backend `index` on its kept connection (opened when
    // needed; once more when a kept connection turns out closed before
    // answering). nullopt when the backend cannot be reached.
    std::optional<http::response<http::string_body>> exchange(std::size_t index,
                                                              http::request<http::string_body>& request) {
      Upstream& up = upstream[index];
      for (int round = 0; round < 2; ++round) {
        const bool reused = up.socket.has_value();
        if (!up.socket && !connect(index)) {
          return std::nullopt;
        }
        beast::error_code ec;
        http::write(*up.socket, request, ec);
        std::optional<http::response_parser<http::string_body>> parser;
        if (!ec) {
          parser.emplace();
          parser->body_limit(k_no_body_limit);
          parser->skip(request.method() == http::verb::head);
          http::read(*up.socket, up.buffer, *parser, ec);
        }
        if (ec) {
          proxy.close_socket(*up.socket);
          up.socket.reset();
          up.buffer.clear();
          if (reused && !proxy.stopping) {
            continue;  // the backend closed an idle connection: a fresh one
          }
          return std::nullopt;
        }
        auto response = parser->release();
        if (!response.keep_alive()) {
          proxy.close_socket(*up.socket);
          up.socket.reset();
          up.buffer.clear();
        }
        return response;
      }
      return std::nullopt;
    }

    bool connect(std::size_t index) {
      const ProxyBackend& backend = proxy.backends[index];
      tcp::socket socket(proxy.io);
      beast::error_code ec;
      tcp::resolver resolver(proxy.io);
      auto endpoints = resolver.resolve(backend.host, std::to_string(backend.port), ec);
      if (ec) {
        return false;
      }
      net::connect(socket, endpoints, ec);
      if (ec) {
        return false;
      }
      proxy.track(socket.native_handle());
      upstream[index].socket.emplace(std::move(socket));
      return true;
    }
  };

  // Listens on 127.0.0.1 at a port the kernel picks and starts accepting.
  void listen() {
    beast::error_code ec;
    const tcp::endpoint loopback(net::ip::make_address("127.0.0.1"), 0);
    acceptor.open(loopback.protocol(), ec);
    if (!ec) {
      acceptor.set_option(net::socket_base::reuse_address(true), ec);
      acceptor.bind(loopback, ec);
    }
    if (!ec) {
      acceptor.listen(net::socket_base::max_listen_connections, ec);
    }
    if (ec) {
      throw std::runtime_error("http proxy: cannot listen on 127.0.0.1: " + ec.message());
    }
    port = acceptor.local_endpoint().port();
    acceptor_thread = std::thread([this] { accept_loop(); });
  }

  // Closes every connection and joins the threads.
  void stop() {
    stopping = true;
    // shutdown(2) wakes a thread blocked in accept or read on the descriptor.
    ::shutdown(acceptor.native_handle(), SHUT_RDWR);
    acceptor_thread.join();
    std::vector<std::thread> joined;
    {
      std::lock_guard lock(mutex);
      for (int fd : open_fds) {
        ::shutdown(fd, SHUT_RDWR);
      }
      joined.swap(threads);
    }
    for (auto& thread : joined) {
      thread.join();
    }
    beast::error_code ignored;
    acceptor.close(ignored);
  }
};

}  // namespace http_proxy_detail

struct HttpProxy::Impl : http_proxy_detail::ProxyCore {};

std::string ProxiedRequest::header(const std::string& lowercase_name) const {
  for (const auto& [name, value] : headers) {
    if (name == lowercase_name) {
      return value;
    }
  }
  return {};
}

bool ProxiedRequest::has_header(const std::string& lowercase_name) const {
  return std::any_of(headers.begin(), headers.end(), [&](const auto& item) { return item.first == lowercase_name; });
}

HttpProxy::HttpProxy(ProxyOptions options) : m_impl(std::make_unique<Impl>()) {
  if (options.backends.empty()) {
    throw std::runtime_error("http proxy: no backend");
  }
  for (const auto& url : options.backends) {
    m_impl->backends.push_back(http_proxy_detail::proxy_parse_backend(url));
  }
  set_rules(std::move(options.rules));
  set_strip_headers(std::move(options.strip_headers));
  m_impl->listen();
}

HttpProxy::HttpProxy(const std::string& backend_url) : HttpProxy(ProxyOptions{{backend_url}, {}, {}}) {}

HttpProxy::~HttpProxy() {
  m_impl->stop();
}

std::string HttpProxy::url() const {
  return "http://127.0.0.1:" + std::to_string(m_impl->port);
}

int HttpProxy::port() const noexcept {
  return m_impl->port;
}

std::vector<ProxiedRequest> HttpProxy::requests() const {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->requests;
}

void HttpProxy::clear_requests() {
  std::lock_guard lock(m_impl->mutex);
  m_impl->requests.clear();
  m_impl->serials.clear();
}

void HttpProxy::set_rules(std::vector<ProxyRule> rules) {
  std::lock_guard lock(m_impl->mutex);
  m_impl->rules = std::move(rules);
}

void HttpProxy::set_strip_headers(std::vector<std::string> names) {
  for (auto& name : names) {
    name = http_proxy_detail::proxy_lowercase(name);
  }
  std::lock_guard lock(m_impl->mutex);
  m_impl->strip_headers = std::move(names);
}

}  // namespace opcache::test
