// Fuzz target: the importers' parsing of vendor files (layouts/mindspore,
// layouts/cann, layouts/torchair, layouts/layout's detect_layout), through a
// scan of a real directory tree written from the input, then the key of each
// candidate as `opcache import` derives it. Input: one byte choosing the
// layout, then the files' contents separated by fuzz::k_part_separator:
//   0 mindspore: .info, .json, .o   (kernel_meta/<stem>.*)
//   1 cann:      .json, .o          (kernel_cache/<soc>/te_<op>_<sha>.*)
//   2 torchair:  .run, then one statistics .json per part (<ts>_<pid>_outputs/)
#include <cstdint>
#include <filesystem>
#include <string>

#include "layouts/layout.hpp"
#include "opcache/key.hpp"
#include "tests/fuzz/fuzz_support.hpp"

namespace {

namespace fs = std::filesystem;
using namespace opcache;

constexpr const char* k_cann_stem = "te_matmulv2_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
constexpr std::size_t k_max_torchair_stats = 8;

std::string_view part(const std::vector<std::string_view>& parts, std::size_t i) {
  return i < parts.size() ? parts[i] : std::string_view();
}

layouts::Scan scan_mindspore(const fs::path& root, const std::vector<std::string_view>& parts) {
  const fs::path meta = root / "rank_0" / "kernel_meta";
  fuzz::write_file(meta / "square_123_0.info", part(parts, 0));
  fuzz::write_file(meta / "square_123_0.json", part(parts, 1));
  fuzz::write_file(meta / "square_123_0.o", part(parts, 2));
  return layouts::scan_mindspore(root);
}

layouts::Scan scan_cann(const fs::path& root, const std::vector<std::string_view>& parts) {
  const fs::path soc = root / "kernel_cache" / "ascend910b";
  fuzz::write_file(soc / (std::string(k_cann_stem) + ".json"), part(parts, 0));
  fuzz::write_file(soc / (std::string(k_cann_stem) + ".o"), part(parts, 1));
  return layouts::scan_cann(root);
}

layouts::Scan scan_torchair(const fs::path& root, const std::vector<std::string_view>& parts) {
  const fs::path outputs = root / "aclnn_static_shape_kernel_outputs" / "20250101_42_outputs";
  fuzz::write_file(outputs / "static_kernel_20250101.run", part(parts, 0));
  for (std::size_t i = 1; i < parts.size() && i <= k_max_torchair_stats; ++i) {
    fuzz::write_file(outputs / "42" / ("op_" + std::to_string(i) + ".json"), parts[i]);
  }
  return layouts::scan_torchair(root);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) {
    return 0;
  }
  // A fresh tree each run, so no file of an earlier input is scanned again.
  const fs::path root = fuzz::scratch_directory() / "tree";
  std::error_code ignored;
  fs::remove_all(root, ignored);
  const auto parts = fuzz::split_parts(fuzz::as_text(data + 1, size - 1));
  layouts::Scan scan;
  switch (data[0] % 3) {
    case 0: scan = scan_mindspore(root, parts); break;
    case 1: scan = scan_cann(root, parts); break;
    default: scan = scan_torchair(root, parts); break;
  }
  (void)layouts::detect_layout(root);
  const Scenario scenario{DeviceMode::single, Phase::infer, "8.0.RC2", "Ascend910B1", {}};
  for (const auto& candidate : scan.candidates) {
    auto key = derive_key(candidate.descriptor_json, scenario, std::nullopt);
    fuzz::trace("candidate " + candidate.origin + " " + candidate.op_type + " " + (key ? *key : key.error().message()));
  }
  for (const auto& skipped : scan.skipped) {
    fuzz::trace("skipped " + skipped.path + ": " + skipped.reason);
  }
  return 0;
}
