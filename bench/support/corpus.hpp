// The benchmark corpus: real compiled kernel triples, made like MindSpore's
// kernel_meta output and cached on disk so that later runs reuse them.
//
// Kernel i is always the same kernel: op type and dtype cycle fastest over 8
// op types x 3 dtypes, and the shape is an injective function of i / 24. Each
// kernel is
//   <stem>.o     a real ELF object compiled by the system `cc -c -O2` from a
//                generated C kernel (tiling table, one function per AI-core
//                block, a dispatching entry point),
//   <stem>.json  kernel metadata with the .o's SHA-256, block dim, kernel name,
//   <stem>.info  the compile job (SoC info, op list),
// and its op descriptor carries volatile fields (kernel_name, full_name,
// job_id) that the store must strip before hashing.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "opcache/types.hpp"

namespace opcache::bench {

/// The scenario every corpus kernel is compiled for (and recorded in the
/// corpus manifest).
inline constexpr const char* k_corpus_scenario = "device=single,phase=train,toolchain=8.0.RC2,soc=Ascend910B1";
/// Compilers run at once while generating.
inline constexpr int k_compile_parallelism = 2;
/// Op types and dtypes the corpus cycles through.
inline constexpr std::size_t k_corpus_op_types = 8;
inline constexpr std::size_t k_corpus_dtypes = 3;

/// The op type of kernel `index` ("Add", "Axpy", ..., "MatMul"), for
/// benchmarks that make synthetic rows shaped like the corpus.
std::string_view corpus_op_type(std::size_t index);

/// An index row shaped like corpus kernel `index`'s (its op type, the corpus
/// scenario's fields, `scenario_json`), under `key` and `digest`; sizes,
/// times and counts are left for the caller.
opcache::Entry corpus_shaped_entry(std::size_t index, std::string key, std::string digest,
                                   const std::string& scenario_json);

/// One kernel of the corpus: its three files on disk and what describes it.
struct Kernel {
  std::string stem;  ///< MindSpore-style kernel name "<Op>_<hash>_0"
  std::string op_type;
  std::string descriptor_json;                 ///< the op descriptor to put under (with volatile fields)
  std::int64_t build_ms = 0;                   ///< how long `cc` took when it was generated
  std::array<std::filesystem::path, 3> files;  ///< .o, .json, .info (absolute when the corpus dir is)
  std::array<std::uint64_t, 3> sizes{};        ///< sizes of `files`, in bytes

  /// The sum of the three files' sizes.
  std::uint64_t raw_bytes() const { return sizes[0] + sizes[1] + sizes[2]; }
  /// `files` as a vector, for Store::put.
  std::vector<std::filesystem::path> file_list() const { return {files.begin(), files.end()}; }
};

/// A loaded corpus: kernels 0..N-1 in order, with no two sharing a stem.
struct Corpus {
  std::vector<Kernel> kernels;
  std::uint64_t raw_bytes = 0;             ///< sum of raw_bytes() over kernels
  std::size_t generated = 0;               ///< kernels compiled by this call
  double generation_seconds = 0;           ///< this call's generation time (0 when all were cached)
  double original_generation_seconds = 0;  ///< total generation time recorded in the cache
};

/// The first `count` kernels, from the cache in `directory` (kernels/ and
/// corpus.json) when it was made by the same generator version and the files
/// are intact; whatever is missing is compiled now, k_compile_parallelism
/// `cc` at a time, and the manifest is rewritten (atomically) to list it.
/// Cached kernels beyond `count` stay listed. Files of another generator
/// version are removed. Prints progress on stderr. Fails (throws) when `cc`
/// cannot run or fails, or when two kernels would share a stem. Not safe to
/// run twice at once on the same directory (other processes may read a
/// complete cache while nothing is generated).
Corpus load_or_generate_corpus(const std::filesystem::path& directory, std::size_t count,
                               const std::string& scenario_json);

}  // namespace opcache::bench
