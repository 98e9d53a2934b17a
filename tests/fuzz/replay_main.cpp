// Replays saved inputs through a fuzz target's LLVMFuzzerTestOneInput, as
// the normal test suite does for every target (CTest fuzz.replay.<target>):
//   fuzz_replay_<target> DIR|FILE...
// Every regular file under each DIR (recursively, in name order) is one
// input. Fails (exit 1) when an argument is missing or a directory holds no
// file, so a lost corpus cannot pass silently; a crashing input crashes the
// process, which fails the test.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

namespace fs = std::filesystem;

// The inputs named by one argument, sorted; empty when there are none.
std::vector<fs::path> inputs_of(const fs::path& argument) {
  std::vector<fs::path> inputs;
  std::error_code ec;
  if (fs::is_regular_file(argument, ec)) {
    inputs.push_back(argument);
    return inputs;
  }
  for (fs::recursive_directory_iterator it(argument, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_regular_file(ec) && it->path().filename().string().front() != '.') {
      inputs.push_back(it->path());
    }
  }
  std::sort(inputs.begin(), inputs.end());
  return inputs;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s DIR|FILE...\n", argv[0]);
    return 2;
  }
  std::size_t replayed = 0;
  for (int i = 1; i < argc; ++i) {
    const auto inputs = inputs_of(argv[i]);
    if (inputs.empty()) {
      std::fprintf(stderr, "fuzz replay: %s is missing or holds no input file\n", argv[i]);
      return 1;
    }
    for (const auto& input : inputs) {
      std::ifstream in(input, std::ios::binary);
      std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (!in.good() && !in.eof()) {
        std::fprintf(stderr, "fuzz replay: cannot read %s\n", input.c_str());
        return 1;
      }
      std::fprintf(stderr, "fuzz replay: %s (%zu bytes)\n", input.c_str(), bytes.size());
      LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
      ++replayed;
    }
  }
  std::printf("fuzz replay: %zu inputs replayed without a crash\n", replayed);
  return 0;
}
