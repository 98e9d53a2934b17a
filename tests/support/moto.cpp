#include "tests/support/moto.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "remote/curl_handle.hpp"

namespace opcache::test {

namespace {

using Clock = std::chrono::steady_clock;

constexpr auto k_ready_deadline = std::chrono::seconds(20);
constexpr auto k_poll_interval = std::chrono::milliseconds(100);
constexpr auto k_stop_grace = std::chrono::seconds(3);
constexpr int k_start_attempts = 3;
constexpr long k_probe_timeout_ms = 500;

// IAM/STS calls made before authentication is enabled are not checked, but
// moto routes a request to a service by the credential scope of its
// Authorization header, so they carry a syntactically valid one.
constexpr const char* k_iam_scope =
    "Authorization: AWS4-HMAC-SHA256 Credential=bootstrap/20240101/us-east-1/iam/aws4_request, "
    "SignedHeaders=host, Signature=0";
constexpr const char* k_sts_scope =
    "Authorization: AWS4-HMAC-SHA256 Credential=bootstrap/20240101/us-east-1/sts/aws4_request, "
    "SignedHeaders=host, Signature=0";
constexpr const char* k_allow_all =
    R"({"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"*","Resource":"*"}]})";
constexpr const char* k_trust_all =
    R"({"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":"*"},"Action":"sts:AssumeRole"}]})";

std::optional<std::string> find_in_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::stringstream directories(path ? path : "");
  std::string directory;
  while (std::getline(directories, directory, ':')) {
    const std::string candidate = (directory.empty() ? "." : directory) + "/" + program;
    if (::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
  }
  return std::nullopt;
}

// A port that was free a moment ago (bind to port 0, read it back, close).
int pick_free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return -1;
  }
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  int port = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    port = ntohs(address.sin_port);
  }
  ::close(fd);
  return port;
}

struct HttpReply {
  long status = 0;  // 0 when no response arrived
  std::string body;
};

std::size_t append_to_reply(char* data, std::size_t size, std::size_t count, void* user) {
  static_cast<std::string*>(user)->append(data, size * count);
  return size * count;
}

HttpReply http(const std::string& url, const std::string* post_body, const std::vector<std::string>& headers,
               long timeout_ms) {
  HttpReply reply;
  auto handle = remote::make_easy_handle();
  remote::HeaderList list;
  for (const auto& line : headers) {
    if (!remote::append_header(list, line)) {
      return reply;
    }
  }
  if (!handle) {
    return reply;
  }
  CURL* h = handle->get();
  curl_easy_setopt(h, CURLOPT_URL, url.c_str());
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, list.get());
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, &append_to_reply);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &reply.body);
  if (post_body != nullptr) {
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, post_body->c_str());
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(post_body->size()));
  }
  if (curl_easy_perform(h) == CURLE_OK) {
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &reply.status);
  }
  return reply;
}

std::string form_encode(const std::vector<std::pair<std::string, std::string>>& fields) {
  std::string out;
  for (const auto& [name, value] : fields) {
    char* escaped = curl_easy_escape(nullptr, value.c_str(), static_cast<int>(value.size()));
    out += (out.empty() ? "" : "&") + name + "=" + (escaped ? escaped : "");
    curl_free(escaped);
  }
  return out;
}

std::string element_text(const std::string& xml, const std::string& name) {
  const std::string open = "<" + name + ">";
  const std::size_t start = xml.find(open);
  const std::size_t end = xml.find("</" + name + ">", start);
  if (start == std::string::npos || end == std::string::npos) {
    return {};
  }
  return xml.substr(start + open.size(), end - start - open.size());
}

}  // namespace

MotoServer::MotoServer() {
  const auto program = find_in_path("moto_server");
  if (!program) {
    m_start_error = "moto_server not found in PATH (install it with: pip install 'moto[server]')";
    return;
  }
  char log_template[] = "/tmp/opcache-moto-XXXXXX";
  const int log_fd = ::mkstemp(log_template);
  if (log_fd < 0) {
    m_start_error = "cannot create a log file for moto_server in /tmp";
    return;
  }
  ::close(log_fd);
  m_log_path = log_template;
  // The port may be taken between picking and binding; moto then exits and we try another.
  for (int attempt = 0; attempt < k_start_attempts; ++attempt) {
    if (!start(*program)) {
      return;
    }
    if (wait_until_ready()) {
      m_start_error.reset();
      return;
    }
    const bool exited = m_pid < 0;
    stop();
    if (!exited) {
      return;  // alive but silent for 20 s: another try would not do better
    }
  }
}

MotoServer::~MotoServer() {
  stop();
  if (!m_log_path.empty() && std::getenv("OPCACHE_KEEP_TEST_DIRS") == nullptr) {
    ::unlink(m_log_path.c_str());
  }
}

bool MotoServer::start(const std::string& program) {
  const int port = pick_free_port();
  if (port <= 0) {
    m_start_error = "cannot find a free port on 127.0.0.1";
    return false;
  }
  const std::string port_text = std::to_string(port);
  m_endpoint = "http://127.0.0.1:" + port_text;
  std::vector<std::string> arguments = {program, "-H", "127.0.0.1", "-p", port_text};
  std::vector<char*> argv;
  for (auto& argument : arguments) {
    argv.push_back(argument.data());
  }
  argv.push_back(nullptr);
  const int log_fd = ::open(m_log_path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    // Only async-signal-safe calls between fork and exec.
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) {
      ::_exit(127);
    }
    ::dup2(null_fd, 0);
    ::dup2(log_fd, 1);
    ::dup2(log_fd, 2);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(log_fd);
  ::close(null_fd);
  if (pid < 0) {
    m_start_error = "fork failed while starting moto_server";
    return false;
  }
  ::setpgid(pid, pid);  // also in the parent, so a kill right away reaches the group
  m_pid = pid;
  return true;
}

bool MotoServer::wait_until_ready() {
  const auto deadline = Clock::now() + k_ready_deadline;
  while (Clock::now() < deadline) {
    int status = 0;
    if (::waitpid(m_pid, &status, WNOHANG) == m_pid) {
      m_pid = -1;
      m_start_error = "moto_server exited during startup: " + log_tail();
      return false;
    }
    // Any HTTP answer will do (moto answers this one with 201).
    if (http(m_endpoint + "/moto-api/config", nullptr, {}, k_probe_timeout_ms).status != 0) {
      return true;
    }
    std::this_thread::sleep_for(k_poll_interval);
  }
  m_start_error = "moto_server did not answer on " + m_endpoint + " within 20 s: " + log_tail();
  return false;
}

std::string MotoServer::log_tail() const {
  std::ifstream in(m_log_path);
  std::stringstream contents;
  contents << in.rdbuf();
  std::string text = contents.str();
  if (text.size() > 600) {
    text = "..." + text.substr(text.size() - 600);
  }
  return text.empty() ? "(no output)" : text;
}

void MotoServer::stop() noexcept {
  if (m_pid <= 0) {
    return;
  }
  ::kill(-m_pid, SIGTERM);
  const auto deadline = Clock::now() + k_stop_grace;
  int status = 0;
  while (::waitpid(m_pid, &status, WNOHANG) == 0) {
    if (Clock::now() >= deadline) {
      ::kill(-m_pid, SIGKILL);
      ::waitpid(m_pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(-m_pid, SIGKILL);  // anything left in the group
  m_pid = -1;
}

MotoServer& MotoServer::shared() {
  static MotoServer server;
  return server;
}

std::optional<std::string> MotoServer::unavailable_reason() { return shared().start_error(); }

MotoServer::AuthenticationKeys MotoServer::enable_authentication() {
  const auto call = [&](const char* scope, std::vector<std::pair<std::string, std::string>> fields) {
    const std::string body = form_encode(fields);
    HttpReply reply = http(m_endpoint + "/", &body, {scope}, 5000);
    if (reply.status != 200) {
      throw std::runtime_error("moto " + fields.front().second + " failed: HTTP " + std::to_string(reply.status) +
                               " " + reply.body);
    }
    return reply.body;
  };
  const std::string iam_version = "2010-05-08";
  call(k_iam_scope, {{"Action", "CreateUser"}, {"UserName", "opcache"}, {"Version", iam_version}});
  call(k_iam_scope, {{"Action", "PutUserPolicy"},
                     {"UserName", "opcache"},
                     {"PolicyName", "all"},
                     {"PolicyDocument", k_allow_all},
                     {"Version", iam_version}});
  const std::string key_xml =
      call(k_iam_scope, {{"Action", "CreateAccessKey"}, {"UserName", "opcache"}, {"Version", iam_version}});
  call(k_iam_scope, {{"Action", "CreateRole"},
                     {"RoleName", "opcache-role"},
                     {"AssumeRolePolicyDocument", k_trust_all},
                     {"Version", iam_version}});
  call(k_iam_scope, {{"Action", "PutRolePolicy"},
                     {"RoleName", "opcache-role"},
                     {"PolicyName", "all"},
                     {"PolicyDocument", k_allow_all},
                     {"Version", iam_version}});
  const std::string role_xml = call(k_sts_scope, {{"Action", "AssumeRole"},
                                                  {"RoleArn", "arn:aws:iam::123456789012:role/opcache-role"},
                                                  {"RoleSessionName", "opcache-test"},
                                                  {"Version", "2011-06-15"}});
  AuthenticationKeys keys;
  keys.user = {element_text(key_xml, "AccessKeyId"), element_text(key_xml, "SecretAccessKey"), ""};
  keys.session = {element_text(role_xml, "AccessKeyId"), element_text(role_xml, "SecretAccessKey"),
                  element_text(role_xml, "SessionToken")};
  if (keys.user.access_key_id.empty() || keys.session.session_token.empty()) {
    throw std::runtime_error("moto returned no access keys: " + key_xml + " " + role_xml);
  }
  // From now on moto checks the signature, key and policy of every request.
  const std::string zero = "0";
  HttpReply reply = http(m_endpoint + "/moto-api/reset-auth", &zero, {"Content-Type: text/plain"}, 5000);
  if (reply.status != 200) {
    throw std::runtime_error("moto reset-auth failed: HTTP " + std::to_string(reply.status) + " " + reply.body);
  }
  return keys;
}

void use_moto_test_credentials() {
  ::setenv("AWS_ACCESS_KEY_ID", "AKIDOPCACHETEST", 1);
  ::setenv("AWS_SECRET_ACCESS_KEY", "opcache/test+secret", 1);
  ::unsetenv("AWS_SESSION_TOKEN");
  ::unsetenv("AWS_PROFILE");
}

}  // namespace opcache::test
