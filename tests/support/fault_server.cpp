#include "tests/support/fault_server.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <stdexcept>

#include "tests/support/server.hpp"

namespace opcache::test {

namespace {

const char* reason(int code) {
  switch (code) {
    case 200:
      return "OK";
    case 201:
      return "Created";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 429:
      return "Too Many Requests";
    case 500:
      return "Internal Server Error";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Unavailable";
    default:
      return "Status";
  }
}

std::string lowercase(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

// `text` without its leading and trailing spaces, tabs and CRs.
std::string trim_blanks(const std::string& text) {
  const auto first = text.find_first_not_of(" \t\r");
  if (first == std::string::npos) {
    return {};
  }
  return text.substr(first, text.find_last_not_of(" \t\r") - first + 1);
}

void send_all(int fd, const std::string& bytes) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (n <= 0) {
      return;
    }
    done += static_cast<std::size_t>(n);
  }
}

}  // namespace

std::string FaultRequest::header(const std::string& lowercase_name) const {
  auto it = headers.find(lowercase_name);
  return it == headers.end() ? std::string() : it->second;
}

FaultReply FaultReply::status(int code, const std::string& body, const std::string& extra_headers) {
  FaultReply reply;
  reply.raw = "HTTP/1.1 " + std::to_string(code) + " " + reason(code) +
              "\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n" + extra_headers +
              "\r\n" + body;
  return reply;
}

FaultReply forward_to(const FaultRequest& request, const std::string& base_url) {
  std::vector<std::string> headers;
  for (const char* name : {"authorization", "content-type", "x-opcache-signature"}) {
    if (!request.header(name).empty()) {
      headers.push_back(std::string(name) + ": " + request.header(name));
    }
  }
  auto answer = http_request(request.method, base_url + request.target, headers, request.body);
  const std::string type = answer.header("content-type");
  return FaultReply::status(static_cast<int>(answer.status), answer.body,
                            type.empty() ? "" : "Content-Type: " + type + "\r\n");
}

FaultReply FaultReply::cut_short(const std::string& body, std::size_t sent) {
  FaultReply reply;
  reply.raw = "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) +
              "\r\nContent-Type: application/vnd.opcache.bundle\r\nConnection: close\r\n\r\n" +
              body.substr(0, std::min(sent, body.size()));
  return reply;
}

FaultServer::FaultServer(FaultScript script) : m_script(std::move(script)) {
  m_listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (m_listener < 0) {
    throw std::runtime_error("fault server: socket failed");
  }
  const int one = 1;
  ::setsockopt(m_listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (::bind(m_listener, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::listen(m_listener, 128) != 0 ||
      ::getsockname(m_listener, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    ::close(m_listener);
    throw std::runtime_error("fault server: cannot listen on 127.0.0.1");
  }
  m_port = ntohs(address.sin_port);
  m_acceptor = std::thread([this] { accept_loop(); });
}

FaultServer::~FaultServer() {
  m_stop = true;
  m_acceptor.join();
  std::vector<std::thread> workers;
  {
    std::lock_guard lock(m_mutex);
    workers.swap(m_workers);
  }
  for (auto& worker : workers) {
    worker.join();
  }
  ::close(m_listener);
}

std::string FaultServer::url() const {
  return "http://127.0.0.1:" + std::to_string(m_port);
}

std::vector<FaultRequest> FaultServer::requests() const {
  std::lock_guard lock(m_mutex);
  return m_requests;
}

int FaultServer::count(const std::string& method) const {
  std::lock_guard lock(m_mutex);
  return static_cast<int>(std::count_if(m_requests.begin(), m_requests.end(),
                                        [&](const FaultRequest& request) { return request.method == method; }));
}

bool FaultServer::wait_readable(int fd, int timeout_ms) const {
  for (int waited = 0; !m_stop && waited < timeout_ms; waited += 50) {
    pollfd poll_fd{fd, POLLIN, 0};
    if (::poll(&poll_fd, 1, 50) > 0) {
      return true;
    }
  }
  return false;
}

void FaultServer::accept_loop() {
  while (!m_stop) {
    if (!wait_readable(m_listener, 1 << 30)) {
      continue;
    }
    const int fd = ::accept4(m_listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      continue;
    }
    ++m_connections;
    std::lock_guard lock(m_mutex);
    m_workers.emplace_back([this, fd] {
      serve(fd);
      ::close(fd);
    });
  }
}

void FaultServer::serve(int fd) {
  constexpr int k_read_timeout_ms = 10000;
  std::string data;
  char buffer[65536];
  auto read_more = [&]() -> bool {
    if (!wait_readable(fd, k_read_timeout_ms)) {
      return false;
    }
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n <= 0) {
      return false;
    }
    data.append(buffer, static_cast<std::size_t>(n));
    return true;
  };
  while (data.find("\r\n\r\n") == std::string::npos) {
    if (!read_more()) {
      return;
    }
  }
  const std::size_t head_end = data.find("\r\n\r\n");
  FaultRequest request;
  {
    const std::string head = data.substr(0, head_end);
    std::size_t line_end = head.find("\r\n");
    const std::string request_line = head.substr(0, line_end);
    const auto space = request_line.find(' ');
    request.method = request_line.substr(0, space);
    request.target = request_line.substr(space + 1, request_line.rfind(' ') - space - 1);
    while (line_end != std::string::npos) {
      const std::size_t start = line_end + 2;
      line_end = head.find("\r\n", start);
      const std::string line = head.substr(start, line_end == std::string::npos ? std::string::npos : line_end - start);
      const auto colon = line.find(':');
      if (colon != std::string::npos) {
        request.headers[lowercase(trim_blanks(line.substr(0, colon)))] = trim_blanks(line.substr(colon + 1));
      }
    }
  }
  data.erase(0, head_end + 4);
  const std::string length_text = request.header("content-length");
  const std::size_t length = length_text.empty() ? 0 : std::strtoull(length_text.c_str(), nullptr, 10);
  if (length > 0 && data.size() < length && lowercase(request.header("expect")) == "100-continue") {
    send_all(fd, "HTTP/1.1 100 Continue\r\n\r\n");
  }
  while (data.size() < length) {
    if (!read_more()) {
      break;
    }
  }
  request.body = data.substr(0, length);

  {
    std::lock_guard lock(m_mutex);
    m_requests.push_back(request);
  }
  FaultReply reply;
  {
    std::lock_guard lock(m_script_mutex);
    reply = m_script(request);
  }
  switch (reply.kind) {
    case FaultReply::Kind::respond:
      send_all(fd, reply.raw);
      ::shutdown(fd, SHUT_WR);
      // Let the client read everything before the close (a close with unread
      // input would reset the connection).
      while (wait_readable(fd, 2000) && ::read(fd, buffer, sizeof buffer) > 0) {
      }
      break;
    case FaultReply::Kind::hang:
      // Until the client gives up (EOF) or the server stops.
      while (!m_stop) {
        if (wait_readable(fd, 100) && ::read(fd, buffer, sizeof buffer) <= 0) {
          break;
        }
      }
      break;
    case FaultReply::Kind::drop:
      break;
  }
}

int refused_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  ::close(fd);
  return ntohs(address.sin_port);
}

}  // namespace opcache::test
