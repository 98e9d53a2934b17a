// Fuzz target: the server's tokens file (server/auth: TokenTable::parse) and
// authorization against what it parsed. The bytes are the file's text; its
// last line, without a leading '#' (a comment to the parser), is also tried
// as an Authorization header, for every scope.
#include <cstdint>
#include <string>
#include <string_view>

#include "server/auth.hpp"
#include "tests/fuzz/fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace opcache::server;
  const auto text = opcache::fuzz::as_text(data, size);
  auto table = TokenTable::parse(text, "tokens file");
  if (!table) {
    return 0;
  }
  auto last_line = text.substr(text.rfind('\n') == std::string_view::npos ? 0 : text.rfind('\n') + 1);
  if (!last_line.empty() && last_line.front() == '#') {
    last_line.remove_prefix(1);
  }
  for (auto scope : {Scope::none, Scope::read, Scope::write, Scope::admin}) {
    for (std::string_view header : {std::string_view(), std::string_view("Bearer secret"), last_line}) {
      (void)table->authorize(header, scope, scope == Scope::read);
    }
  }
  (void)hash_token(last_line);
  return 0;
}
