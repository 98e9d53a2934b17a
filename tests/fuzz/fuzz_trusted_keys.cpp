// Fuzz target: the trusted-keys file (store/trust: TrustedKeys::parse) and
// the signature text every carrier uses (store/signature: the index column,
// X-Opcache-Signature headers, the signature objects of file:// and s3://
// remotes), then the judgement of those signatures against those keys. The
// bytes are read as both; signatures that parse must print back to text that
// parses to the same signatures.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "base/base64.hpp"
#include "store/signature.hpp"
#include "store/trust.hpp"
#include "tests/fuzz/fuzz_support.hpp"

namespace {

using namespace opcache;

constexpr std::string_view k_key = "aa41869463d9ff6d4ee1f368ffbbcfdd8ffb01db942b9371250ef0386ac44f72";
constexpr std::string_view k_digest = "8f670829f9127d00f2d66342929bb4c260fec9631aa2e080bbf189c42249e4dc";

void check_round_trip(const store::Signatures& signatures) {
  auto again = store::parse_signatures(store::format_signatures(signatures));
  if (!again || *again != signatures) {
    std::fprintf(stderr, "signatures do not survive format_signatures then parse_signatures\n");
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto text = fuzz::as_text(data, size);
  const auto parts = fuzz::split_parts(text);
  const auto keys_text = parts.front();
  const auto signatures_text = parts.size() > 1 ? parts[1] : text;
  (void)store::parse_signature_requirement(text);
  if (auto decoded = base::base64_decode(signatures_text)) {
    (void)base::base64_encode(*decoded);
  }
  auto trusted = store::TrustedKeys::parse(keys_text, "trusted keys");
  fuzz::trace(trusted ? std::to_string(trusted->keys().size()) + " trusted keys" : trusted.error().message());
  auto signatures = store::parse_signatures(signatures_text);
  fuzz::trace(signatures ? std::to_string(signatures->size()) + " signatures" : signatures.error().message());
  if (signatures) {
    check_round_trip(*signatures);
  }
  if (trusted) {
    for (const auto& key : trusted->keys()) {
      (void)trusted->find(key.public_key);
    }
    const store::Signatures none;
    (void)store::judge_signatures(*trusted, k_key, k_digest, signatures ? *signatures : none);
  }
  return 0;
}
