// bench_http_floor: the least an HTTP/1.1 server built as `opcache serve` is
// built can do per GET, for bench/run's server scenario to put beside
// opcache serve's figures (issue 39: "the floor beside the figure").
//
//   bench_http_floor --root DIR --threads N --port-file FILE
//
// Serves every file under DIR/v1/entries at /v1/entries/<name> with a head
// made once per file: held in memory from the start, and those of 32 KiB or
// more also kept open. What it shares with opcache serve is the framework
// and its use: Boost.Asio with one io_context per I/O thread and connections
// dealt round-robin, a beast::tcp_stream with a timeout armed for every read,
// Boost.Beast's request parser, keep-alive, a small answer's head and body
// sent by one non-blocking sendmsg(2) when the socket takes it all
// (async_write of the rest otherwise), a large one's head then its file by
// sendfile(2) (waiting for the socket when it is full). What it leaves out
// is everything opcache serve does per request beyond that: routing, access
// control, the store, metrics, usage statistics and the request log. A GET of
// another path answers 404; any other method 405.
#include <fcntl.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include <utility>  // before Boost 1.74's Asio, which uses std::exchange without it

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace fs = std::filesystem;
using tcp = net::ip::tcp;

namespace {

constexpr auto k_read_timeout = std::chrono::seconds(30);

// opcache serve's threshold for sending a bundle by sendfile (server/storage.hpp k_zero_copy_bytes).
constexpr std::size_t k_zero_copy_bytes = 32 * 1024;

// One answer, ready to send: its head, its body, and for a large body its file, open.
struct Answer {
  std::string head;
  std::string body;
  int file = -1;
};

using AnswerTable = std::unordered_map<std::string, Answer>;

std::string head_for(unsigned status, const char* reason, std::size_t length) {
  return "HTTP/1.1 " + std::to_string(status) + " " + reason +
         "\r\nContent-Type: application/octet-stream\r\nContent-Length: " + std::to_string(length) + "\r\n\r\n";
}

// Every file of `root`/v1/entries, by the request target that names it.
AnswerTable load_answers(const fs::path& root) {
  AnswerTable answers;
  for (const auto& file : fs::directory_iterator(root / "v1" / "entries")) {
    std::ifstream in(file.path(), std::ios::binary);
    std::string body{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    const int file_descriptor = body.size() >= k_zero_copy_bytes ? ::open(file.path().c_str(), O_RDONLY | O_CLOEXEC) : -1;
    Answer answer{head_for(200, "OK", body.size()), std::move(body), file_descriptor};
    answers.emplace("/v1/entries/" + file.path().filename().string(), std::move(answer));
  }
  return answers;
}

const Answer& not_found() {
  static const Answer answer{head_for(404, "Not Found", 0), {}};
  return answer;
}

const Answer& not_allowed() {
  static const Answer answer{head_for(405, "Method Not Allowed", 0), {}};
  return answer;
}

// One connection: read a request, answer it, again until the client closes.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, const AnswerTable& answers) : m_stream(std::move(socket)), m_answers(answers) {}

  void read() {
    m_parser.emplace();
    m_stream.expires_after(k_read_timeout);
    http::async_read(m_stream, m_buffer, *m_parser,
                     [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_read(ec); });
  }

 private:
  const Answer& answer_for(const http::request<http::empty_body>& request) const {
    if (request.method() != http::verb::get) {
      return not_allowed();
    }
    const auto found = m_answers.find(std::string(request.target()));
    return found == m_answers.end() ? not_found() : found->second;
  }

  void on_read(beast::error_code ec) {
    if (ec) {
      return close();
    }
    const auto& request = m_parser->get();
    m_keep_alive = request.keep_alive();
    send(answer_for(request));
  }

  // A large answer's head (held back by MSG_MORE), then its file by sendfile,
  // as far as the socket takes them; then again once the socket can take more.
  void send_file(const Answer& answer, std::size_t head_sent, off_t offset) {
    beast::error_code ec;
    if (!m_stream.socket().native_non_blocking()) {
      m_stream.socket().native_non_blocking(true, ec);  // sendfile(2) has no MSG_DONTWAIT
    }
    const int socket = m_stream.socket().native_handle();
    bool failed = static_cast<bool>(ec);
    while (head_sent < answer.head.size()) {
      const ssize_t sent = ::send(socket, answer.head.data() + head_sent, answer.head.size() - head_sent,
                                  MSG_MORE | MSG_NOSIGNAL | MSG_DONTWAIT);
      if (sent <= 0) {
        failed = !(sent < 0 && (errno == EAGAIN || errno == EINTR));
        break;
      }
      head_sent += static_cast<std::size_t>(sent);
    }
    while (!failed && head_sent == answer.head.size() && static_cast<std::size_t>(offset) < answer.body.size()) {
      const ssize_t sent =
          ::sendfile(socket, answer.file, &offset, answer.body.size() - static_cast<std::size_t>(offset));
      if (sent <= 0) {
        failed = !(sent < 0 && (errno == EAGAIN || errno == EINTR));
        break;
      }
    }
    if (failed) {
      return close();
    }
    if (head_sent == answer.head.size() && static_cast<std::size_t>(offset) == answer.body.size()) {
      return after_answer();
    }
    m_stream.socket().async_wait(tcp::socket::wait_write,
                                 [self = shared_from_this(), &answer, head_sent, offset](beast::error_code ec) {
                                   if (ec) {
                                     return self->close();
                                   }
                                   self->send_file(answer, head_sent, offset);
                                 });
  }

  // Head and body in one sendmsg when the socket takes them; the rest by async_write.
  void send(const Answer& answer) {
    if (answer.file >= 0) {
      return send_file(answer, 0, 0);
    }
    iovec parts[2] = {{const_cast<char*>(answer.head.data()), answer.head.size()},
                      {const_cast<char*>(answer.body.data()), answer.body.size()}};
    msghdr message{};
    message.msg_iov = parts;
    message.msg_iovlen = answer.body.empty() ? 1 : 2;
    const ssize_t sent = ::sendmsg(m_stream.socket().native_handle(), &message, MSG_NOSIGNAL | MSG_DONTWAIT);
    const std::size_t done = sent < 0 ? 0 : static_cast<std::size_t>(sent);
    const std::size_t total = answer.head.size() + answer.body.size();
    if (done == total) {
      return after_answer();
    }
    std::vector<net::const_buffer> rest;
    if (done < answer.head.size()) {
      rest.emplace_back(answer.head.data() + done, answer.head.size() - done);
      rest.emplace_back(answer.body.data(), answer.body.size());
    } else {
      rest.emplace_back(answer.body.data() + (done - answer.head.size()), total - done);
    }
    net::async_write(m_stream, rest, [self = shared_from_this()](beast::error_code ec, std::size_t) {
      if (ec) {
        return self->close();
      }
      self->after_answer();
    });
  }

  void after_answer() {
    if (m_keep_alive) {
      return read();
    }
    close();
  }

  void close() {
    beast::error_code ignored;
    m_stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
  }

  beast::tcp_stream m_stream;
  const AnswerTable& m_answers;
  beast::flat_buffer m_buffer;
  std::optional<http::request_parser<http::empty_body>> m_parser;
  bool m_keep_alive = true;
};

// Accepts on the first context and deals connections round-robin to all of them.
class Listener {
 public:
  Listener(tcp::acceptor& acceptor, std::vector<std::unique_ptr<net::io_context>>& contexts,
           const AnswerTable& answers)
      : m_acceptor(acceptor), m_contexts(contexts), m_answers(answers) {}

  void accept() {
    auto& context = *m_contexts[m_next++ % m_contexts.size()];
    m_acceptor.async_accept(context, [this](beast::error_code ec, tcp::socket socket) {
      if (!ec) {
        socket.set_option(tcp::no_delay(true), ec);
        std::make_shared<Session>(std::move(socket), m_answers)->read();
      }
      accept();
    });
  }

 private:
  tcp::acceptor& m_acceptor;
  std::vector<std::unique_ptr<net::io_context>>& m_contexts;
  const AnswerTable& m_answers;
  std::size_t m_next = 0;
};

struct Options {
  fs::path root;
  int threads = 1;
  fs::path port_file;
};

std::optional<Options> parse_options(int argc, char** argv) {
  Options options;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string name = argv[i];
    if (name == "--root") {
      options.root = argv[i + 1];
    } else if (name == "--threads") {
      options.threads = std::max(1, std::atoi(argv[i + 1]));
    } else if (name == "--port-file") {
      options.port_file = argv[i + 1];
    } else {
      return std::nullopt;
    }
  }
  if (options.root.empty() || options.port_file.empty() || argc % 2 == 0) {
    return std::nullopt;
  }
  return options;
}

}  // namespace

int main(int argc, char** argv) {
  const auto options = parse_options(argc, argv);
  if (!options) {
    std::cerr << "usage: bench_http_floor --root DIR --threads N --port-file FILE\n";
    return 2;
  }
  std::signal(SIGPIPE, SIG_IGN);  // sendfile(2) to a connection the client closed: EPIPE, not the end
  try {
    const AnswerTable answers = load_answers(options->root);
    std::vector<std::unique_ptr<net::io_context>> contexts;
    for (int i = 0; i < options->threads; ++i) {
      contexts.push_back(std::make_unique<net::io_context>(1));
    }
    tcp::acceptor acceptor(*contexts.front(), tcp::endpoint(net::ip::make_address("127.0.0.1"), 0));
    acceptor.listen(net::socket_base::max_listen_connections);
    Listener listener(acceptor, contexts, answers);
    listener.accept();
    std::ofstream(options->port_file) << "127.0.0.1:" << acceptor.local_endpoint().port() << "\n";
    std::vector<std::thread> threads;
    std::vector<net::executor_work_guard<net::io_context::executor_type>> guards;
    for (std::size_t i = 1; i < contexts.size(); ++i) {
      guards.push_back(net::make_work_guard(*contexts[i]));
      threads.emplace_back([context = contexts[i].get()] { context->run(); });
    }
    contexts.front()->run();
    for (auto& thread : threads) {
      thread.join();
    }
  } catch (const std::exception& error) {
    std::cerr << "bench_http_floor: " << error.what() << "\n";
    return 1;
  }
  return 0;
}
