// Uses an installed opcache through find_package(opcache) and the C++ API:
// key, put, get, and a byte comparison of what came back.
//
// Usage: cmake_consumer WORK_DIR. Prints "cmake_consumer: ok" and exits 0, or
// prints what failed and exits 1.
#include <opcache/opcache.hpp>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>

namespace fs = std::filesystem;

namespace {

int fail(const std::string& what) {
  std::cerr << "cmake_consumer: FAILED: " << what << '\n';
  return 1;
}

void write_file(const fs::path& path, const std::string& contents) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << contents;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: " << argv[0] << " WORK_DIR\n";
    return 1;
  }
  const fs::path work = argv[1];
  fs::create_directories(work / "in");

  const std::string object_bytes = std::string("\x7f" "ELF\x02\x01\x01\x00", 8) + std::string(200, '\xa5');
  const std::string metadata = R"({"binFileName":"matmul_1","binFileSuffix":".o","blockDim":8})";
  write_file(work / "in" / "matmul_1.o", object_bytes);
  write_file(work / "in" / "matmul_1.json", metadata);

  opcache::StoreConfig config;
  config.cache_dir = work / "cache";
  auto store = opcache::Store::open(config);
  if (!store) {
    return fail("Store::open: " + store.error().message());
  }
  auto scenario = opcache::parse_scenario("device=multi,phase=train,toolchain=8.0.RC2,soc=Ascend910B1");
  if (!scenario) {
    return fail("parse_scenario: " + scenario.error().message());
  }
  const std::string descriptor = R"({"op_type":"MatMul","attrs":{"transpose_a":false},"inputs":[]})";

  auto key = store->key(descriptor, *scenario);
  if (!key) {
    return fail("Store::key: " + key.error().message());
  }
  auto put = store->put(descriptor, *scenario, {work / "in" / "matmul_1.o", work / "in" / "matmul_1.json"});
  if (!put) {
    return fail("Store::put: " + put.error().message());
  }
  if (!put->stored || put->key != *key) {
    return fail("Store::put stored=" + std::to_string(put->stored) + " key " + put->key + ", expected key " + *key);
  }
  auto hit = store->get(*key, work / "out");
  if (!hit) {
    return fail("Store::get: " + hit.error().message());
  }
  if (!*hit) {
    return fail("Store::get: a miss right after put for " + *key);
  }
  if ((*hit)->files.size() != 2 || (*hit)->entry.op_type != "MatMul") {
    return fail("Store::get returned " + std::to_string((*hit)->files.size()) + " files of op type " +
                (*hit)->entry.op_type);
  }
  if (read_file(work / "out" / "matmul_1.o") != object_bytes) {
    return fail("out/matmul_1.o differs from what was stored");
  }
  if (read_file(work / "out" / "matmul_1.json") != metadata) {
    return fail("out/matmul_1.json differs from what was stored");
  }
  auto miss = store->get(std::string(64, 'f'), work / "out2");
  if (!miss || *miss) {
    return fail("Store::get of an absent key is not a clean miss");
  }
  std::cout << "cmake_consumer: opcache " << opcache::k_version_string << ", stored and read back " << *key << '\n';
  std::cout << "cmake_consumer: ok\n";
  return 0;
}
