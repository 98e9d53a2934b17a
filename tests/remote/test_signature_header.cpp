// The X-Opcache-Signature header value (remote/signature_header.hpp): one or
// several comma-separated signatures, blanks ignored, repeats merged,
// anything else a usage error quoting it.
#include <doctest/doctest.h>

#include "base/ed25519.hpp"
#include "remote/signature_header.hpp"

using opcache::remote::parse_signature_header;

namespace {

opcache::Signature make_signature(const std::string& key) {
  auto signer = opcache::base::Ed25519PrivateKey::generate();
  REQUIRE(signer.ok());
  auto signature = opcache::store::sign_entry(*signer, key, std::string(64, 'd'));
  REQUIRE(signature.ok());
  return *signature;
}

}  // namespace

TEST_CASE("remote::parse_signature_header reads one, several comma-separated, and repeated signatures") {
  const auto a = make_signature(std::string(64, 'a'));
  const auto b = make_signature(std::string(64, 'a'));
  const auto text_a = opcache::store::format_signature(a);
  const auto text_b = opcache::store::format_signature(b);

  auto one = parse_signature_header(text_a);
  REQUIRE(one.ok());
  CHECK(*one == opcache::store::Signatures{a});
  auto two = parse_signature_header(" " + text_a + " ,\t" + text_b + ", ," + text_a);
  REQUIRE(two.ok());
  CHECK(*two == opcache::store::Signatures{a, b});
  auto none = parse_signature_header("  ");
  REQUIRE(none.ok());
  CHECK(none->empty());
}

TEST_CASE("remote::parse_signature_header refuses a malformed item with a usage error quoting it") {
  const auto text = opcache::store::format_signature(make_signature(std::string(64, 'a')));
  for (const std::string& bad : {std::string("garbage"), text + ",AAAA:BBBB", text.substr(0, text.size() - 4),
                                 text + ":extra"}) {
    auto parsed = parse_signature_header(bad);
    CHECK_FALSE(parsed.ok());
    if (!parsed.ok()) {
      CHECK(parsed.error().code() == opcache::ErrorCode::usage);
    }
  }
}
