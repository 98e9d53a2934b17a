#include "tests/support/cann_tree.hpp"

#include <algorithm>
#include <filesystem>

#include "tests/support/temp_dir.hpp"

namespace opcache::test {

namespace fs = std::filesystem;

namespace {

fs::path version_file(const fs::path& root, const std::string& component) {
  return component == "toolkit" ? root / "version.info" : root / component / "version.info";
}

// Shell single quotes around `text` (which holds no single quote).
std::string quoted(const std::string& text) { return "'" + text + "'"; }

}  // namespace

const fs::path& CannTree::write() const {
  for (const auto& [component, version] : versions) {
    set_version(component, version);
  }
  const fs::path built_in = root / "compiler/data/fusion_strategy/built-in";
  write_text(built_in / "built_in_fusion_strategy.json", R"({"MatMul":{"split":[1,2,4]},"Conv2D":{"tile":16}})");
  write_text(built_in / "ub_fusion/Ascend910B1.json", R"({"fusion":["Relu","Add"]})");
  write_text(root / "opp/built-in/op_impl/ai_core/tbe/impl/square.py", "def square(x, y):\n    pass\n");
  write_text(root / "runtime/lib64/libruntime.so", std::string("\x7f" "ELF fake runtime"));
  write_text(root / "compiler/bin/atc", "#!/bin/sh\n");
  return root;
}

void CannTree::set_version(const std::string& component, const std::string& version) const {
  write_text(version_file(root, component), "Version=" + version + "\nversion_dir=" + version +
                                                "\ntimestamp=20240730_110000000\narch=x86_64\n");
}

fs::path CannTree::add_vendor(const std::string& name, const std::string& version) const {
  const fs::path package = write_custom_op_package(root / "opp/vendors" / name, version);
  const fs::path config = root / "opp/vendors/config.ini";
  std::string priority;
  if (fs::exists(config)) {
    const std::string text = read_text(config);
    const auto start = text.find('=') + 1;
    priority = text.substr(start, text.find('\n') - start) + ",";
  }
  set_vendor_priority(priority + name);
  return package;
}

void CannTree::set_vendor_priority(const std::string& priority) const {
  write_text(root / "opp/vendors/config.ini", "load_priority=" + priority + "\n");
}

fs::path write_opp(const fs::path& directory, const std::string& version) {
  write_text(directory / "version.info",
             "Version=" + version + "\nversion_dir=" + version + "\ntimestamp=20241030_120000000\n");
  write_text(directory / "built-in/op_impl/ai_core/tbe/impl/square.py",
             "def square(x, y):\n    pass  # " + version + "\n");
  return directory;
}

fs::path write_custom_op_package(const fs::path& directory, const std::string& version) {
  if (!version.empty()) {
    write_text(directory / "version.info", "Version=" + version + "\ncustom_opp_compiler_version=8.0.RC2\n");
  }
  write_text(custom_op_kernel_source(directory),
             "#include \"kernel_operator.h\"\nextern \"C\" __global__ __aicore__ void add_custom(GM_ADDR x, "
             "GM_ADDR y, GM_ADDR z) {}\n");
  write_text(directory / "op_impl/ai_core/tbe/customize_impl/dynamic/add_custom.py",
             "def add_custom(x, y, z, kernel_name='add_custom'):\n    pass\n");
  write_text(directory / "op_impl/ai_core/tbe/config/ascend910b/aic-ascend910b-ops-info.json",
             R"({"AddCustom":{"input0":{"name":"x","dtype":"float16"},"opFile":{"value":"add_custom"}}})");
  write_text(directory / "op_impl/ai_core/tbe/op_tiling/lib/linux/x86_64/libcust_opmaster_rt2.0.so",
             std::string("\x7f") + "ELF fake tiling");
  write_text(directory / "op_proto/inc/op_proto.h", "REG_OP(AddCustom).INPUT(x, TensorType::ALL())\n");
  write_text(directory / "op_proto/lib/linux/x86_64/libcust_opsproto_rt2.0.so",
             std::string("\x7f") + "ELF fake proto");
  write_text(directory / "framework/tensorflow/npu_supported_ops.json", R"({"AddCustom":{"isOplist":"true"}})");
  write_text(directory / "op_api/include/aclnn_add_custom.h", "aclnnStatus aclnnAddCustom(void);\n");
  write_text(directory / "bin/set_env.bash", "export ASCEND_CUSTOM_OPP_PATH=" + directory.string() + "\n");
  return directory;
}

fs::path custom_op_kernel_source(const fs::path& package) {
  return package / "op_impl/ai_core/tbe/customize_impl/dynamic/add_custom.cpp";
}

fs::path write_tune_bank(const fs::path& directory, const std::string& soc) {
  const fs::path bank = directory / soc;
  write_text(bank / "rl/MatMulV2_float16.json", R"({"shape":[1024,1024],"tiling":"bm128_bn256"})");
  write_text(bank / "ga/Conv2D.json", R"({"tiling":"k32"})");
  return bank;
}

std::string npu_smi_table(const std::vector<std::string>& chips) {
  std::string table =
      "+------------------------------------------------------------------------------------------------+\n"
      "| npu-smi 23.0.rc2                 Version: 23.0.rc2                                             |\n"
      "+---------------------------+---------------+----------------------------------------------------+\n"
      "| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|\n"
      "| Chip                      | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |\n"
      "+===========================+===============+====================================================+\n";
  for (std::size_t i = 0; i < chips.size(); ++i) {
    std::string name = chips[i];
    name.resize(std::max<std::size_t>(name.size(), 20), ' ');
    table += "| " + std::to_string(i) + "     " + name + "| OK            | 93.4        39                0    / 0             |\n";
    table += "| 0                         | 0000:C1:00.0  | 0           0    / 0          3163 / 65536         |\n";
    table += "+===========================+===============+====================================================+\n";
  }
  table +=
      "+---------------------------+---------------+----------------------------------------------------+\n"
      "| NPU     Chip              | Process id    | Process name             | Process memory(MB)      |\n"
      "+===========================+===============+====================================================+\n"
      "| 0       0                 | 4242          | python3                  | 1200                    |\n"
      "+===========================+===============+====================================================+\n";
  return table;
}

void write_npu_smi(const fs::path& bin, const std::vector<std::string>& chips, const fs::path& runs) {
  write_text(bin / "npu-smi.table", npu_smi_table(chips));
  write_executable(bin / "npu-smi", "#!/bin/sh\necho run >> " + quoted(runs.string()) +
                                        "\nif [ \"$1\" != info ]; then echo 'usage: npu-smi info' >&2; exit 2; fi\n"
                                        "cat " + quoted((bin / "npu-smi.table").string()) + "\n");
}

void write_python3(const fs::path& bin, const std::string& major_minor, const fs::path& runs) {
  std::string script = "#!/bin/sh\n";
  if (!runs.empty()) {
    script += "echo run >> " + quoted(runs.string()) + "\n";
  }
  script += "echo " + major_minor + "\n";
  write_executable(bin / "python3", script);
}

}  // namespace opcache::test
