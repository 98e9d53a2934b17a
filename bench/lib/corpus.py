"""The kernel corpora of bench/run, generated deterministically and cached under
<build>/bench-corpus/<name>/ between runs (regenerated when the generator
version or the compiler changes):

  ckernels  shape-specialised C kernels (8 op types x 3 dtypes x shapes; a tiling
            table and one function per AI-core block with its rows baked in),
            compiled with `gcc -O2 -c`: objects of 2-20 KB, bundles of ~3 KB.
  tables    table-driven C kernels, each with a 96 KiB quantised lookup table in
            .rodata: objects of ~100 KB, bundles of ~65 KB.
  cuda      shape-specialised CUDA kernels (elementwise, reductions, tiled matmul)
            compiled to cubin with `nvcc -cubin -arch=sm_80 -O3`.

Each corpus directory holds src/<stem>.<ext>, desc/<stem>.json (the op
descriptor `opcache exec --desc` hashes, with the volatile kernel_name and
full_name the store strips) and ref/<stem>.<out> (the cold compile's output,
the bytes every warm run must reproduce).
"""
import json
import os
import random
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from harness import BenchError, log, run

GENERATOR_VERSION = 1
OPS = ["Add", "Axpy", "ReLU", "FastGelu", "ReduceSum", "ReduceMax", "Softmax", "MatMul"]
DTYPES = [("float16", "_Float16"), ("float32", "float"), ("int32", "int")]
EXPRS = {"Add": "x[i] + y[i]", "Axpy": "(T)2.5f * x[i] + y[i]", "ReLU": "x[i] > 0 ? x[i] : (T)0",
         "FastGelu": "x[i] / ((T)1 + (T)(x[i] * (T)-1.702f > 0 ? x[i] * (T)-1.702f : 0))"}


class Corpus:
    """One generated corpus: `stems` in order, and the paths of each kernel's files."""

    def __init__(self, name, directory: Path, stems, src_ext, out_ext, compile_args):
        self.name, self.dir, self.stems = name, directory, stems
        self.src_ext, self.out_ext = src_ext, out_ext
        self.compile_args = compile_args  # the compiler command before "-c/-cubin SRC -o OUT"

    def src(self, stem):
        return f"src/{stem}{self.src_ext}"  # relative: compiles run in self.dir (ccache hashes the path)

    def desc(self, stem):
        return self.dir / "desc" / f"{stem}.json"

    def ref(self, stem):
        return self.dir / "ref" / f"{stem}{self.out_ext}"

    def output_name(self, stem):
        return f"{stem}{self.out_ext}"

    def compile_command(self, stem, out_path):
        """The compiler command line that compiles `stem` to `out_path` (run in self.dir)."""
        return [*self.compile_args, self.src(stem), "-o", str(out_path)]


def c_kernel_source(i):
    """A C kernel: op i % 8, dtype, shape and block count from i; tiling baked in."""
    op = OPS[i % 8]
    dtype, ctype = DTYPES[(i // 8) % 3]
    rows, cols, blocks = 8 * (1 + i % 16), 16 * (1 + (i // 24) % 16), 1 + (i * 7) % 24
    stem = f"k_{i:05d}"
    # Per-kernel quantisation scales, as calibrated kernels carry: data that compresses like real constants.
    rng = random.Random(i + 7)
    scales = [f"{rng.uniform(0.5, 1.5):.6f}f" for _ in range(384 + (i * 37) % 512)]
    lines = [f"/* Generated {op} kernel {stem}: [{rows},{cols}] {dtype}, {blocks} AI-core blocks. */",
             "#include <stddef.h>", f"typedef {ctype} T;",
             f"static const float k_scale[{len(scales)}] = {{"]
    lines += ["  " + ", ".join(scales[k:k + 8]) + "," for k in range(0, len(scales), 8)]
    lines += ["};", f"static const unsigned k_tiling[{blocks}][2] = {{"]
    lines += [f"  {{{b * rows // blocks}u, {(b + 1) * rows // blocks}u}}," for b in range(blocks)]
    lines.append("};")
    for b in range(blocks):
        lo, hi = b * rows // blocks, (b + 1) * rows // blocks
        lines.append(f"static void block_{b}(const T *restrict x, const T *restrict y, T *restrict z) {{")
        if op in EXPRS:
            lines.append(f"  for (size_t i = {lo * cols}; i < {hi * cols}; ++i) z[i] = {EXPRS[op]};")
        elif op in ("ReduceSum", "ReduceMax"):
            comb = "acc += x[r * %d + c];" % cols if op == "ReduceSum" else \
                "acc = x[r * %d + c] > acc ? x[r * %d + c] : acc;" % (cols, cols)
            lines.append(f"  for (size_t r = {lo}; r < {hi}; ++r) {{ T acc = (T)0;"
                         f" for (size_t c = 0; c < {cols}; ++c) {comb} z[r] = acc + y[r]; }}")
        elif op == "Softmax":
            lines.append(f"  for (size_t r = {lo}; r < {hi}; ++r) {{ T m = x[r * {cols}], s = (T)0;"
                         f" for (size_t c = 1; c < {cols}; ++c) m = x[r * {cols} + c] > m ? x[r * {cols} + c] : m;"
                         f" for (size_t c = 0; c < {cols}; ++c) {{ T e = x[r * {cols} + c] - m; z[r * {cols} + c] = e; s += e; }}"
                         f" for (size_t c = 0; c < {cols}; ++c) z[r * {cols} + c] = s != 0 ? z[r * {cols} + c] / s : 0; }}")
        else:  # MatMul: [rows, 16] x [16, cols]
            lines.append(f"  for (size_t r = {lo}; r < {hi}; ++r) for (size_t c = 0; c < {cols}; ++c) {{"
                         f" T acc = (T)0; for (size_t k = 0; k < 16; ++k) acc += x[r * 16 + k] * y[k * {cols} + c];"
                         f" z[r * {cols} + c] = acc; }}")
        lines.append("}")
    lines.append(f"void {stem}__kernel0(const T *x, const T *y, T *z, unsigned block) {{")
    lines.append(f"  z[0] = (T)(z[0] * k_scale[block % {len(scales)}]);")
    lines.append("  switch (block) {")
    lines += [f"  case {b}: block_{b}(x, y, z); break;" for b in range(blocks)]
    lines += ["  default: break;", "  }", "}", ""]
    shape = [rows, cols]
    desc = {"op_type": op, "inputs": [{"shape": shape, "dtype": dtype, "format": "ND"}] * 2,
            "outputs": [{"shape": shape, "dtype": dtype, "format": "ND"}],
            "attrs": {"block_dim": blocks}, "kernel_name": f"{stem}__kernel0",
            "full_name": f"Default/network/{op}-op{i}"}
    return stem, "\n".join(lines), desc


def table_kernel_source(i, words=12288):
    """A table-driven activation: a 96 KiB quantised u16 lookup table (per-kernel,
    roughly normal bytes, so zstd compresses it like real code, not like padding)."""
    ops = ["Gelu", "FastGelu", "Silu", "Erf", "Exp", "Tanh", "Sigmoid", "Dequantize"]
    op, dtype = ops[i % 8], ["float16", "float32", "bfloat16"][(i // 8) % 3]
    rows, cols, blocks = 8 * (1 + i % 32), 128 * (1 + (i // 32) % 16), 1 + i % 40
    stem = f"t_{i:05d}"
    rng = random.Random(i + 1)
    words_text = []
    for _ in range(words):
        parts = []
        for _ in range(4):
            v = min(255, max(0, int(128 + 40 * (rng.random() + rng.random() + rng.random() - 1.5))))
            parts.append(f"{rng.randrange(4):02x}{v:02x}")
        words_text.append("0x" + "".join(parts) + "ULL,")
    table = "\n".join(" ".join(words_text[k:k + 6]) for k in range(0, words, 6))
    tiling = "\n".join(f"  {{{b * rows // blocks}, {(b + 1) * rows // blocks}}}," for b in range(blocks))
    source = f"""/* Generated {op} kernel {stem}: [{rows},{cols}] {dtype}, {blocks} blocks, through a lookup table. */
#include <stddef.h>
#include <stdint.h>
static const uint64_t k_lut[{words}] = {{
{table}
}};
static const uint32_t k_tiling[{blocks}][2] = {{
{tiling}
}};
void {stem}__kernel0(const uint16_t *x, uint16_t *y, uint32_t block) {{
  const uint16_t *lut = (const uint16_t *)k_lut;
  if (block >= {blocks}) return;
  for (uint32_t r = k_tiling[block][0]; r < k_tiling[block][1]; ++r)
    for (uint32_t c = 0; c < {cols}; ++c) {{
      size_t at = (size_t)r * {cols} + c;
      y[at] = (uint16_t)(lut[x[at] % {words * 4}] + {i % 97});
    }}
}}
"""
    t = {"shape": [rows, cols], "dtype": dtype, "format": "ND"}
    desc = {"op_type": op, "inputs": [t], "outputs": [t],
            "attrs": {"lut": "quantised_u16", "lut_entries": words * 4, "lut_seed": i + 1, "block_dim": blocks},
            "kernel_name": f"{stem}__kernel0", "full_name": f"Default/network/{op}-op{i}"}
    return stem, source, desc


def cuda_kernel_source(i):
    """A CUDA kernel specialised to its shape: elementwise, row reduction or tiled matmul."""
    kinds = ["Add", "Gelu", "ReduceSum", "Softmax", "MatMul"]
    op = kinds[i % 5]
    rows, cols = 32 * (1 + i % 8), 64 * (1 + (i // 5) % 8)
    stem = f"c_{i:04d}"
    n = rows * cols
    if op in ("Add", "Gelu"):
        expr = "x[i] + y[i]" if op == "Add" else "0.5f * x[i] * (1.0f + tanhf(0.7978845608f * (x[i] + 0.044715f * x[i] * x[i] * x[i])))"
        body = f"""extern "C" __global__ void {stem}(const float *__restrict__ x, const float *__restrict__ y, float *__restrict__ z) {{
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < {n}u) z[i] = {expr};
}}"""
    elif op in ("ReduceSum", "Softmax"):
        tail = "z[r] = s;" if op == "ReduceSum" else f"for (unsigned c = threadIdx.x; c < {cols}u; c += blockDim.x) z[r * {cols} + c] = __expf(x[r * {cols} + c]) / s;"
        pre = "x[r * %d + c]" % cols if op == "ReduceSum" else "__expf(x[r * %d + c])" % cols
        body = f"""extern "C" __global__ void {stem}(const float *__restrict__ x, float *__restrict__ z) {{
  __shared__ float part[256];
  unsigned r = blockIdx.x;
  if (r >= {rows}u) return;
  float acc = 0.f;
  for (unsigned c = threadIdx.x; c < {cols}u; c += blockDim.x) acc += {pre};
  part[threadIdx.x] = acc;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {{
    if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
    __syncthreads();
  }}
  float s = part[0];
  if (threadIdx.x == 0) {{ {tail if op == "ReduceSum" else ""} }}
  {"" if op == "ReduceSum" else tail}
}}"""
    else:
        body = f"""#define TILE 16
extern "C" __global__ void {stem}(const float *__restrict__ a, const float *__restrict__ b, float *__restrict__ c) {{
  __shared__ float ta[TILE][TILE], tb[TILE][TILE];
  unsigned row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
  float acc = 0.f;
#pragma unroll
  for (unsigned k0 = 0; k0 < {cols}u; k0 += TILE) {{
    ta[threadIdx.y][threadIdx.x] = row < {rows}u ? a[row * {cols} + k0 + threadIdx.x] : 0.f;
    tb[threadIdx.y][threadIdx.x] = col < {rows}u ? b[(k0 + threadIdx.y) * {rows} + col] : 0.f;
    __syncthreads();
#pragma unroll
    for (unsigned k = 0; k < TILE; ++k) acc += ta[threadIdx.y][k] * tb[k][threadIdx.x];
    __syncthreads();
  }}
  if (row < {rows}u && col < {rows}u) c[row * {rows} + col] = acc;
}}"""
    source = f"// Generated CUDA {op} kernel {stem}: [{rows},{cols}] float32.\n{body}\n"
    t = {"shape": [rows, cols], "dtype": "float32", "format": "ND"}
    desc = {"op_type": op, "inputs": [t], "outputs": [t], "attrs": {"target": "sm_80"},
            "kernel_name": stem, "full_name": f"Default/network/{op}-op{i}"}
    return stem, source, desc


def _prepare(name, directory, count, generate, src_ext, out_ext, compile_args, toolchain, jobs):
    """Generates (or reuses) `count` kernels in `directory`, compiling the missing references."""
    stamp = {"generator": GENERATOR_VERSION, "name": name, "toolchain": toolchain, "compile": compile_args}
    stamp_path = directory / "corpus.json"
    if stamp_path.exists():
        old = json.loads(stamp_path.read_text())
        if {k: old.get(k) for k in stamp} != stamp:
            log(f"corpus {name}: made by another generator or toolchain; regenerating")
            shutil.rmtree(directory)
    for sub in ("src", "desc", "ref"):
        (directory / sub).mkdir(parents=True, exist_ok=True)
    corpus = Corpus(name, directory, [], src_ext, out_ext, compile_args)
    todo = []
    # Sources are dated an hour back: ccache's direct mode ignores files modified in the last second.
    old_time = time.time() - 3600
    for i in range(count):
        stem, source, desc = generate(i)
        corpus.stems.append(stem)
        src = directory / corpus.src(stem)
        if not src.exists() or not corpus.ref(stem).exists():
            src.write_text(source)
            os.utime(src, (old_time, old_time))
            corpus.desc(stem).write_text(json.dumps(desc, sort_keys=True) + "\n")
            todo.append(stem)
    if todo:
        log(f"corpus {name}: compiling {len(todo)} kernels ({' '.join(compile_args)}; cached for later runs)")
        start = time.monotonic()

        def build(stem):
            run(corpus.compile_command(stem, corpus.ref(stem)), cwd=directory, what=f"compiling {stem}")
        with ThreadPoolExecutor(jobs) as pool:
            list(pool.map(build, todo))
        stamp["generation_seconds"] = round(time.monotonic() - start, 1) + (
            json.loads(stamp_path.read_text()).get("generation_seconds", 0) if stamp_path.exists() else 0)
        stamp_path.write_text(json.dumps(stamp) + "\n")
    elif not stamp_path.exists():
        stamp_path.write_text(json.dumps(stamp) + "\n")
    return corpus


def toolchain_line(command):
    return run([command, "--version"]).strip().splitlines()[0 if command != "nvcc" else -1]


def ckernels(root: Path, count, jobs):
    args = ["gcc", "-O2", "-c"]
    return _prepare("ckernels", root / "ckernels", count, c_kernel_source, ".c", ".o", args,
                    toolchain_line("gcc"), jobs)


def tables(root: Path, count, jobs):
    args = ["gcc", "-O2", "-c"]
    return _prepare("tables", root / "tables", count, table_kernel_source, ".c", ".o", args,
                    toolchain_line("gcc"), jobs)


def cuda(root: Path, count, jobs, nvcc):
    # -c beside -cubin changes nothing in the cubin, but without it ccache 4.7 takes the call
    # for a link ("called_for_link") and caches nothing.
    args = [str(nvcc), "-cubin", "-c", "-arch=sm_80", "-O3"]
    line = run([nvcc, "--version"]).strip().splitlines()[-2]
    return _prepare("cuda", root / "cuda", count, cuda_kernel_source, ".cu", ".cubin", args, line, jobs)


def check_outputs(corpus, out_dir: Path, stems, what):
    """Raises BenchError unless every stem's output in out_dir equals the cold compile's bytes."""
    for stem in stems:
        got = out_dir / corpus.output_name(stem)
        if not got.exists():
            raise BenchError(f"{what}: {got} was not written")
        if got.read_bytes() != corpus.ref(stem).read_bytes():
            raise BenchError(f"{what}: {got} differs from the cold compile {corpus.ref(stem)}")
