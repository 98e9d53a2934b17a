#include "tests/support/server.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <curl/curl.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "tests/support/process.hpp"
#include "tests/support/temp_dir.hpp"

namespace opcache::test {

namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

void ensure_curl_global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

}  // namespace

// ---------------------------------------------------------------------------
// ServerProcess

ServerProcess::ServerProcess(const fs::path& storage, const std::vector<std::string>& extra_args,
                             std::chrono::milliseconds ready_timeout, const std::vector<std::string>& global_args)
    : m_dir(make_unique_dir("opcache-serve")), m_log_path(m_dir / "server.log") {
  const fs::path port_file = m_dir / "port";
  std::vector<std::string> args = {cli_path()};
  args.insert(args.end(), global_args.begin(), global_args.end());
  args.insert(args.end(), {"serve", "--listen", "127.0.0.1:0", "--port-file", port_file.string(), "--storage",
                           storage.string()});
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  m_tls = std::find(extra_args.begin(), extra_args.end(), "--tls-cert") != extra_args.end();

  // Its own process group (so a kill reaches everything it runs), default
  // signal dispositions and an empty mask whatever the test process uses.
  SpawnOptions options;
  options.out = m_log_path;
  options.err = m_log_path;
  options.group = ProcessGroup::own;
  options.default_signals = true;
  options.unset_env = hermetic_variables();
  try {
    m_pid = spawn_process(args, options);
  } catch (...) {
    m_pid = -1;
    throw;
  }

  const auto deadline = Clock::now() + ready_timeout;
  while (true) {
    const std::string text = read_text(port_file);
    if (!text.empty() && text.back() == '\n') {
      const auto colon = text.rfind(':');
      m_port = colon == std::string::npos ? 0 : std::atoi(text.c_str() + colon + 1);
      if (m_port > 0) {
        return;
      }
      throw std::runtime_error("unreadable port file: " + text);
    }
    if (exited()) {
      throw std::runtime_error("opcache serve exited with " + std::to_string(*m_exit_code) +
                               " during start-up: " + log_text());
    }
    if (Clock::now() >= deadline) {
      ::kill(-m_pid, SIGKILL);
      throw std::runtime_error("opcache serve did not write its port file within " +
                               std::to_string(ready_timeout.count()) + " ms: " + log_text());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

ServerProcess::~ServerProcess() {
  if (m_pid > 0 && !m_exit_code) {
    ::kill(-m_pid, SIGKILL);
    int status = 0;
    while (::waitpid(m_pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  if (std::getenv("OPCACHE_KEEP_TEST_DIRS") == nullptr) {
    std::error_code ec;
    fs::remove_all(m_dir, ec);
  }
}

std::string ServerProcess::base_url() const {
  return std::string(m_tls ? "https" : "http") + "://127.0.0.1:" + std::to_string(m_port);
}

std::string ServerProcess::log_text() const { return read_text(m_log_path); }

void ServerProcess::signal(int signal_number) const {
  if (m_pid > 0 && !m_exit_code) {
    ::kill(m_pid, signal_number);
  }
}

bool ServerProcess::exited() {
  if (m_exit_code) {
    return true;
  }
  int status = 0;
  if (m_pid > 0 && ::waitpid(m_pid, &status, WNOHANG) == m_pid) {
    m_exit_code = decode_wait_status(status);
    ::kill(-m_pid, SIGKILL);  // anything left in its group
    return true;
  }
  return false;
}

std::optional<int> ServerProcess::wait_exit(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (!exited()) {
    if (Clock::now() >= deadline) {
      return std::nullopt;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return m_exit_code;
}

int ServerProcess::stop(std::chrono::milliseconds timeout) {
  if (exited()) {
    return *m_exit_code;
  }
  ::kill(m_pid, SIGTERM);
  if (auto code = wait_exit(timeout)) {
    return *code;
  }
  ::kill(-m_pid, SIGKILL);
  int status = 0;
  while (::waitpid(m_pid, &status, 0) < 0 && errno == EINTR) {
  }
  m_exit_code = decode_wait_status(status);
  return *m_exit_code;
}

// ---------------------------------------------------------------------------
// HTTP client

std::string HttpResponse::header(const std::string& lowercase_name) const {
  auto it = headers.find(lowercase_name);
  return it == headers.end() ? std::string() : it->second;
}

std::vector<std::string> HttpResponse::header_values(const std::string& lowercase_name) const {
  std::vector<std::string> values;
  for (const auto& [name, value] : header_lines) {
    if (name == lowercase_name) {
      values.push_back(value);
    }
  }
  return values;
}

std::string HttpResponse::error_code() const {
  auto parsed = nlohmann::json::parse(body, nullptr, false);
  return parsed.is_object() && parsed.contains("error") && parsed["error"].is_string()
             ? parsed["error"].get<std::string>()
             : body;
}

namespace {

struct ListDeleter {
  void operator()(curl_slist* list) const noexcept { curl_slist_free_all(list); }
};
struct FileCloser {
  void operator()(std::FILE* file) const noexcept { std::fclose(file); }
};

// The request body: a string or a file, readable and rewindable by libcurl.
struct UploadSource {
  const std::string* text = nullptr;
  std::FILE* file = nullptr;
  std::size_t offset = 0;
};

std::size_t read_upload(char* buffer, std::size_t size, std::size_t count, void* user) {
  auto* source = static_cast<UploadSource*>(user);
  const std::size_t room = size * count;
  if (source->file != nullptr) {
    return std::fread(buffer, 1, room, source->file);
  }
  const std::size_t n = std::min(room, source->text->size() - source->offset);
  std::memcpy(buffer, source->text->data() + source->offset, n);
  source->offset += n;
  return n;
}

int seek_upload(void* user, curl_off_t offset, int origin) {
  auto* source = static_cast<UploadSource*>(user);
  if (origin != SEEK_SET) {
    return CURL_SEEKFUNC_CANTSEEK;
  }
  if (source->file != nullptr) {
    return std::fseek(source->file, static_cast<long>(offset), SEEK_SET) == 0 ? CURL_SEEKFUNC_OK
                                                                               : CURL_SEEKFUNC_FAIL;
  }
  source->offset = std::min<std::size_t>(static_cast<std::size_t>(offset), source->text->size());
  return CURL_SEEKFUNC_OK;
}

std::size_t append_body(char* data, std::size_t size, std::size_t count, void* user) {
  static_cast<std::string*>(user)->append(data, size * count);
  return size * count;
}

std::string trim(std::string text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) {
    text.pop_back();
  }
  std::size_t start = 0;
  while (start < text.size() && std::isspace(static_cast<unsigned char>(text[start]))) {
    ++start;
  }
  return text.substr(start);
}

std::size_t collect_header(char* data, std::size_t size, std::size_t count, void* user) {
  auto* response = static_cast<HttpResponse*>(user);
  const std::string line(data, size * count);
  if (line.rfind("HTTP/", 0) == 0) {
    // a new response (after 100 Continue): keep only the final one
    response->headers.clear();
    response->header_lines.clear();
    return size * count;
  }
  const auto colon = line.find(':');
  if (colon != std::string::npos) {
    std::string name = line.substr(0, colon);
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
    std::string value = trim(line.substr(colon + 1));
    response->header_lines.emplace_back(name, value);
    response->headers[std::move(name)] = std::move(value);
  }
  return size * count;
}

}  // namespace

struct HttpClient::Impl {
  // Not a deleter type from the anonymous namespace: Impl has external
  // linkage (-Wsubobject-linkage when this file is part of a unity batch).
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> handle{nullptr, &curl_easy_cleanup};
};

HttpClient::HttpClient() : m_impl(std::make_unique<Impl>()) {
  ensure_curl_global_init();
  m_impl->handle.reset(curl_easy_init());
  if (!m_impl->handle) {
    throw std::runtime_error("curl_easy_init failed");
  }
}

HttpClient::~HttpClient() = default;

HttpResponse HttpClient::request(const std::string& method, const std::string& url,
                                 const std::vector<std::string>& headers, const std::string& body,
                                 const HttpOptions& options) {
  CURL* h = m_impl->handle.get();
  curl_easy_reset(h);  // options cleared; live connections and TLS sessions kept
  HttpResponse response;
  std::unique_ptr<curl_slist, ListDeleter> list;
  for (const auto& line : headers) {
    curl_slist* appended = curl_slist_append(list.get(), line.c_str());
    if (appended == nullptr) {
      throw std::runtime_error("curl_slist_append failed");
    }
    list.release();
    list.reset(appended);
  }
  char error_buffer[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(h, CURLOPT_URL, url.c_str());
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_1_1));
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, options.timeout_ms);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, error_buffer);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, list.get());
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, &append_body);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &response.body);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, &collect_header);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, &response);
  if (!options.ca_file.empty()) {
    curl_easy_setopt(h, CURLOPT_CAINFO, options.ca_file.c_str());
    curl_easy_setopt(h, CURLOPT_CAPATH, static_cast<char*>(nullptr));
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
  }
  if (options.cert_info) {
    curl_easy_setopt(h, CURLOPT_CERTINFO, 1L);
  }

  UploadSource source;
  source.text = &body;
  std::unique_ptr<std::FILE, FileCloser> file;
  const bool has_body = options.body_file || !body.empty() || method == "PUT" || method == "POST";
  if (method == "HEAD") {
    curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
  } else if (has_body) {
    curl_off_t size = static_cast<curl_off_t>(body.size());
    if (options.body_file) {
      file.reset(std::fopen(options.body_file->c_str(), "rb"));
      if (!file) {
        throw std::runtime_error("cannot open " + options.body_file->string());
      }
      source.file = file.get();
      size = static_cast<curl_off_t>(fs::file_size(*options.body_file));
    }
    curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(h, CURLOPT_READFUNCTION, &read_upload);
    curl_easy_setopt(h, CURLOPT_READDATA, &source);
    curl_easy_setopt(h, CURLOPT_SEEKFUNCTION, &seek_upload);
    curl_easy_setopt(h, CURLOPT_SEEKDATA, &source);
    curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, size);
    if (method != "PUT") {
      curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method.c_str());
    }
  } else if (method != "GET") {
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method.c_str());
  }

  const CURLcode code = curl_easy_perform(h);
  if (code != CURLE_OK) {
    response.error = error_buffer[0] != '\0' ? error_buffer : curl_easy_strerror(code);
  }
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &response.status);
  curl_easy_getinfo(h, CURLINFO_NUM_CONNECTS, &response.new_connections);
  if (options.cert_info) {
    curl_certinfo* info = nullptr;
    if (curl_easy_getinfo(h, CURLINFO_CERTINFO, &info) == CURLE_OK && info != nullptr && info->num_of_certs > 0) {
      for (curl_slist* item = info->certinfo[0]; item != nullptr; item = item->next) {
        const std::string line = item->data;
        if (line.rfind("Cert:", 0) == 0) {
          response.peer_certificate = line.substr(5);
        }
      }
    }
  }
  return response;
}

HttpResponse http_request(const std::string& method, const std::string& url, const std::vector<std::string>& headers,
                          const std::string& body, const HttpOptions& options) {
  HttpClient client;
  return client.request(method, url, headers, body, options);
}

// ---------------------------------------------------------------------------
// Raw connections

namespace {

int connect_loopback(int port, int receive_buffer_bytes = 0) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return -1;
  }
  if (receive_buffer_bytes > 0) {
    // Before connect(), so the window the peer sees is small from the start.
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &receive_buffer_bytes, sizeof receive_buffer_bytes);
  }
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

int remaining_ms(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left < 0 ? 0 : static_cast<int>(left);
}

}  // namespace

RawConnection::RawConnection(int port, int receive_buffer_bytes) : m_fd(connect_loopback(port, receive_buffer_bytes)) {
  if (m_fd < 0) {
    throw std::runtime_error("cannot connect to 127.0.0.1:" + std::to_string(port) + ": " + std::strerror(errno));
  }
}

RawConnection::~RawConnection() { close(); }

bool RawConnection::can_connect(int port) {
  const int fd = connect_loopback(port);
  if (fd < 0) {
    return false;
  }
  ::close(fd);
  return true;
}

bool RawConnection::send(const std::string& bytes) {
  std::size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = ::send(m_fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return false;
    }
    sent += static_cast<std::size_t>(n);
  }
  return true;
}

std::size_t RawConnection::read_some(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (!m_peer_closed && m_fd >= 0) {
    pollfd poll_fd{m_fd, POLLIN, 0};
    const int ready = ::poll(&poll_fd, 1, remaining_ms(deadline));
    if (ready < 0 && errno == EINTR) {
      continue;
    }
    if (ready <= 0) {
      return 0;  // timeout
    }
    char buffer[65536];
    const ssize_t n = ::recv(m_fd, buffer, sizeof buffer, 0);
    if (n > 0) {
      m_received.append(buffer, static_cast<std::size_t>(n));
      return static_cast<std::size_t>(n);
    }
    if (n < 0 && errno == EINTR) {
      continue;
    }
    m_peer_closed = true;  // end of stream or reset
  }
  return 0;
}

std::string RawConnection::receive(std::chrono::milliseconds timeout, const std::string& until) {
  const auto deadline = Clock::now() + timeout;
  const std::size_t start = m_received.size();
  while (!m_peer_closed && m_fd >= 0 && remaining_ms(deadline) > 0) {
    if (!until.empty() && m_received.find(until, start) != std::string::npos) {
      break;
    }
    read_some(std::chrono::milliseconds(remaining_ms(deadline)));
  }
  return m_received.substr(start);
}

std::string RawConnection::receive_response(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  std::size_t start = m_received.size();
  while (true) {
    const std::string got = m_received.substr(start);
    const auto end = got.find("\r\n\r\n");
    if (end != std::string::npos) {
      if (raw_status(got) == 100) {
        start += end + 4;
        continue;
      }
      // Content-Length, case-insensitively.
      std::string lower = got.substr(0, end + 2);
      std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
      std::size_t length = 0;
      if (auto at = lower.find("\r\ncontent-length:"); at != std::string::npos) {
        length = static_cast<std::size_t>(std::strtoull(lower.c_str() + at + 17, nullptr, 10));
      }
      if (got.size() >= end + 4 + length) {
        return got;
      }
    }
    if (m_peer_closed || m_fd < 0 || remaining_ms(deadline) == 0) {
      return got;
    }
    read_some(std::chrono::milliseconds(remaining_ms(deadline)));
  }
}

bool RawConnection::wait_closed(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (!m_peer_closed && m_fd >= 0 && remaining_ms(deadline) > 0) {
    read_some(std::chrono::milliseconds(remaining_ms(deadline)));
  }
  return m_peer_closed;
}

void RawConnection::shutdown_send() {
  if (m_fd >= 0) {
    ::shutdown(m_fd, SHUT_WR);
  }
}

void RawConnection::close() {
  if (m_fd >= 0) {
    ::close(m_fd);
    m_fd = -1;
  }
}

int raw_status(const std::string& raw) {
  if (raw.rfind("HTTP/1.", 0) != 0 || raw.size() < 12) {
    return 0;
  }
  return std::atoi(raw.c_str() + 9);
}

}  // namespace opcache::test
