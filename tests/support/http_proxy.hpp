// A recording HTTP/1.1 reverse proxy on 127.0.0.1 for tests that need to see
// or bend the traffic between two real peers: a client and an S3 server
// (moto) whose endpoint is the proxy, a load balancer in front of several
// `opcache serve` replicas, a storage that lacks a feature (a header
// stripped, a status answered instead of the backend's).
//
// Each request is read whole (header and body), recorded as it arrived,
// then either answered by the first rule that matches it or forwarded, with
// the named headers removed, to the next backend in round-robin order. The
// Host header is forwarded unchanged, so SigV4 signatures made for the
// proxy's address verify at the backend. `Expect: 100-continue` is answered
// by the proxy itself (100) and not forwarded.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace opcache::test {

/// One request as the proxy received it from its client, before any header
/// was stripped.
struct ProxiedRequest {
  /// `backend` when no backend was asked: a rule answered, or none answered.
  static constexpr std::size_t k_no_backend = static_cast<std::size_t>(-1);

  std::string method;
  std::string target;                                        ///< as sent: path and query string, still percent-encoded
  std::vector<std::pair<std::string, std::string>> headers;  ///< in order, names lowercased
  /// The index (in ProxyOptions::backends) of the backend that answered, or
  /// k_no_backend.
  std::size_t backend = k_no_backend;
  /// The status sent back to the client: the backend's, a rule's, 502 when
  /// no backend could be reached; 0 while the request is in progress or when
  /// the connection was closed without an answer.
  int status = 0;

  /// The value of the header named `lowercase_name` (the first one), or "".
  std::string header(const std::string& lowercase_name) const;
  /// Whether the request carried the header named `lowercase_name`.
  bool has_header(const std::string& lowercase_name) const;
};

/// A request the proxy answers itself instead of forwarding it. Every
/// non-empty condition must hold for the rule to match.
struct ProxyRule {
  std::string method;           ///< the request's method ("" any)
  std::string target_contains;  ///< text the request target contains ("" any)
  std::string header;           ///< a header the request carries, name lowercased ("" any)
  /// The status answered, with an empty body (Content-Length: 0); 0 closes
  /// the client's connection without any answer (a dropped connection).
  int status = 0;
};

/// What the proxy forwards to and how.
struct ProxyOptions {
  /// "http://127.0.0.1:PORT" (or "127.0.0.1:PORT") of each backend; at least
  /// one. Requests go to them in turn, one request at a time (not one
  /// connection at a time): request n to backend n mod size. A backend that
  /// refuses the connection is skipped for that request (the next one is
  /// tried, as a load balancer does); when none accepts, the client gets 502.
  std::vector<std::string> backends;
  /// Request headers removed before forwarding (names, any case); the
  /// recorded request still shows them.
  std::vector<std::string> strip_headers;
  /// Requests answered by the proxy; the first matching rule applies.
  std::vector<ProxyRule> rules;
};

/// The proxy. Listens from construction at a port chosen at run time; each
/// client connection is served by a thread of its own, with its own
/// kept-alive connection to each backend. The destructor closes every
/// connection (in progress or idle) and joins the threads. All member
/// functions are thread-safe.
class HttpProxy {
 public:
  /// Starts listening. Throws std::runtime_error when `options` names no
  /// backend or a malformed one, or when it cannot listen.
  explicit HttpProxy(ProxyOptions options);
  /// A proxy forwarding to the one backend `backend_url`.
  explicit HttpProxy(const std::string& backend_url);
  ~HttpProxy();
  HttpProxy(const HttpProxy&) = delete;
  HttpProxy& operator=(const HttpProxy&) = delete;

  /// "http://127.0.0.1:<port>".
  std::string url() const;
  int port() const noexcept;

  /// Every request received so far, in arrival order (a copy).
  std::vector<ProxiedRequest> requests() const;
  /// Forgets the requests received so far.
  void clear_requests();

  /// Replaces the rules for the requests read from now on.
  void set_rules(std::vector<ProxyRule> rules);
  /// Replaces the headers stripped from the requests read from now on.
  void set_strip_headers(std::vector<std::string> names);

 private:
  struct Impl;
  std::unique_ptr<Impl> m_impl;
};

}  // namespace opcache::test
