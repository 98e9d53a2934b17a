#include "tests/support/kernels.hpp"

#include <stdexcept>

#include <nlohmann/json.hpp>

#include "base/sha256.hpp"
#include "tests/support/process.hpp"
#include "tests/support/temp_dir.hpp"

namespace opcache::test {

std::filesystem::path compile_object(const std::filesystem::path& dir, const std::string& name,
                                     const std::string& source) {
  std::filesystem::create_directories(dir);
  auto c_file = dir / (name + ".c");
  auto object = dir / (name + ".o");
  write_text(c_file, source);
  auto result = run_process({"cc", "-c", "-O1", "-fPIC", "-o", object.string(), c_file.string()});
  if (result.exit_code != 0) {
    throw std::runtime_error("cc failed for " + c_file.string() + ": " + result.err);
  }
  std::filesystem::remove(c_file);
  return object;
}

KernelTriple make_kernel(const std::filesystem::path& dir, const std::string& op, int length) {
  const std::string expression = op == "square" ? "x[i] * x[i]"
                                 : op == "relu" ? "x[i] > 0 ? x[i] : 0"
                                 : op == "neg"  ? "-x[i]"
                                                : "x[i] + 1.0f";
  KernelTriple kernel;
  kernel.stem = op + "_" + std::to_string(1000003 * length) + "_0";
  std::string source = "void " + kernel.stem + "__kernel0(const float* x, float* y) {\n" +
                       "  for (int i = 0; i < " + std::to_string(length) + "; ++i) y[i] = " + expression + ";\n}\n";
  kernel.object = compile_object(dir, kernel.stem, source);

  nlohmann::json descriptor = {{"op_type", op},
                               {"inputs", {{{"shape", {length}}, {"dtype", "float32"}, {"format", "ND"}}}},
                               {"outputs", {{{"shape", {length}}, {"dtype", "float32"}, {"format", "ND"}}}},
                               {"attrs", nlohmann::json::object()}};
  kernel.descriptor_json = descriptor.dump();

  nlohmann::json metadata = {{"binFileName", kernel.stem},
                             {"binFileSuffix", ".o"},
                             {"blockDim", 1},
                             {"kernelName", kernel.stem + "__kernel0"},
                             {"magic", "RT_DEV_BINARY_MAGIC_ELF"},
                             {"sha256", base::sha256_hex(read_text(kernel.object))}};
  kernel.metadata = dir / (kernel.stem + ".json");
  write_text(kernel.metadata, metadata.dump());

  nlohmann::json info = {{"job_content",
                          {{"SocInfo", {{"socVersion", "Ascend910B1"}, {"deviceId", "0"}}},
                           {"fusion_op_name", kernel.stem},
                           {"op_list", {{{"type", op}, {"func_name", op}}}}}},
                         {"job_id", 1},
                         {"job_type", "Compile"}};
  kernel.info = dir / (kernel.stem + ".info");
  write_text(kernel.info, info.dump());
  return kernel;
}

}  // namespace opcache::test
