"""Scenarios that compile through the caches (bench/run): the warm hit per kernel
(opcache exec vs ccache, C and CUDA), and the remote warm start (empty local
cache, full team cache: ccache with its remote on nginx WebDAV vs opcache exec
with layered lookup, and vs opcache pull then exec). Every measured command's
exit status is checked, every warm run must be a hit by the tools' own
counters, and every output must equal the cold compile's bytes.
"""
import hashlib
import json
import shutil
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import corpus as corpora
from harness import BenchError, distribution, log, median, ratio, run, timed, timed_faults
from peers import Ccache
from server_bench import write_store_layout

SCENARIO = "device=single,phase=train,toolchain=gcc-12,soc=x86_64"


class Opcache:
    """The opcache CLI with a clean environment (no caller's OPCACHE_* settings)."""

    def __init__(self, binary: Path, env):
        self.binary, self.env = binary, env

    def cmd(self, store, *args, remote=None):
        where = ["--remote", remote] if remote else ["--no-remote"]
        return [self.binary, "-C", store, *where, *args]

    def exec_cmd(self, store, corpus, stem, out_dir, scenario, remote=None):
        """`opcache exec` of one kernel: descriptor, --out and --output as `opcache exec --help` asks."""
        return self.cmd(store, "exec", "--desc", corpus.desc(stem), "--scenario", scenario,
                        "--out", out_dir, "--output", corpus.output_name(stem), "--",
                        *corpus.compile_command(stem, out_dir / corpus.output_name(stem)), remote=remote)

    def stats(self, store):
        return json.loads(run(self.cmd(store, "--json", "stats"), env=self.env))

    def exec_all_cold(self, store, corpus, stems, scenario, jobs=2):
        """Stores every stem through a cold `opcache exec` of its compile command, run where the
        measured runs run it (in the corpus directory): exec keys on the command, the source's
        content and the compiler, so only exec itself can fill the entries a warm exec hits.
        Returns {stem: key}."""
        def build(stem):
            with tempfile.TemporaryDirectory(prefix="opcache-fill-") as out:
                command = self.exec_cmd(store, corpus, stem, Path(out), scenario)
                command.insert(command.index("exec"), "--json")
                document = json.loads(run(command, env=self.env, cwd=corpus.dir, what=f"opcache exec {stem}"))
                return stem, document["key"]
        with ThreadPoolExecutor(jobs) as pool:
            keys = dict(pool.map(build, stems))
        if len(set(keys.values())) != len(stems):
            raise BenchError(f"{corpus.name}: {len(stems)} kernels share keys ({len(set(keys.values()))} distinct)")
        return keys


def cached_store(ctx, name, parts, scenario):
    """A store holding every kernel of `parts` ([(corpus, stems)]): compiled once and kept under the
    corpus root (keyed by the opcache version line, the corpora and the scenario), copied into
    this run's work directory so that every run starts from the same store.
    Returns (store path, {stem: key})."""
    stamp = json.dumps([ctx.opcache_version, "filled-by-exec", scenario] + [[c.name, c.stems[0], len(stems)] for c, stems in parts])
    golden = ctx.corpus_root / "stores" / f"{name}-{hashlib.sha256(stamp.encode()).hexdigest()[:12]}"
    keys_path = golden.with_suffix(".keys.json")
    if keys_path.exists() and not _still_hits(ctx, golden, parts[0][0], scenario):
        # exec keys on every file the compile read: an upgraded compiler, a new ld.so.cache after
        # an apt install... make every kept entry a miss. Fill it again rather than measure misses.
        log(f"store {name}: the kept store no longer hits (the compiler or its files changed): filling it again")
        keys_path.unlink()
    if not keys_path.exists():
        shutil.rmtree(golden, ignore_errors=True)
        log(f"store {name}: compiling {sum(len(s) for _, s in parts)} kernels through opcache exec once "
            f"(kept in {golden.parent})")
        keys = {}
        for corpus, stems in parts:
            keys.update(ctx.opcache.exec_all_cold(golden, corpus, stems, scenario))
        keys_path.write_text(json.dumps(keys) + "\n")
    store = ctx.work / "stores" / name
    shutil.copytree(golden, store)
    return store, json.loads(keys_path.read_text())


def _still_hits(ctx, golden, corpus, scenario):
    """Whether a warm `opcache exec` of the corpus's first kernel, on a throwaway copy of the kept
    store, is a hit."""
    with tempfile.TemporaryDirectory(prefix="opcache-golden-") as work:
        store, out = Path(work) / "store", Path(work) / "out"
        shutil.copytree(golden, store)
        out.mkdir()
        command = ctx.opcache.exec_cmd(store, corpus, corpus.stems[0], out, scenario)
        command.insert(command.index("exec"), "--json")
        document = json.loads(run(command, env=ctx.opcache.env, cwd=corpus.dir, what="opcache exec (kept store check)"))
        return document.get("source") == "hit"


def fresh_dir(path: Path):
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


def counter(stats, name):
    return stats.get("counters", {}).get(name, 0)


def warm_hits(ctx, corpus, stems, passes, scenario, cold_plain_passes=0):
    """Per-kernel warm hits, opcache exec vs ccache (direct mode), interleaved kernel by kernel
    with alternating order; optionally the cold compile without any cache too. Returns the figures."""
    work = fresh_dir(ctx.work / f"hits-{corpus.name}")
    out = work / "out"
    ccache = Ccache(corpus.dir / "ccache-local")
    opc = ctx.opcache
    cold_plain = {s: [] for s in stems}
    log(f"{corpus.name}: filling both caches with {len(stems)} kernels (both kept under {ctx.corpus_root})")
    store, _ = cached_store(ctx, f"hits-{corpus.name}", [(corpus, stems)], scenario)
    fill_ccache(corpus, stems, ccache, work)
    for p in range(cold_plain_passes):
        log(f"{corpus.name}: cold compile without a cache, pass {p + 1}/{cold_plain_passes}")
        for stem in stems:
            fresh_dir(out)
            cold_plain[stem].append(1e3 * timed(corpus.compile_command(stem, out / corpus.output_name(stem)),
                                                cwd=corpus.dir))
            corpora.check_outputs(corpus, out, [stem], "cold compile")
    before_o, before_c = opc.stats(store), ccache.stats()
    tools = ("opcache", "ccache", "process_floor")
    times = {tool: {s: [] for s in stems} for tool in tools}
    faults = {tool: {s: [] for s in stems} for tool in tools}
    # The floor: a process that does nothing (/bin/true), started the same way. No tool that runs
    # as a process per kernel, as both wrappers do, can be faster than it.
    commands = {"opcache": lambda s: (opc.exec_cmd(store, corpus, s, out, scenario), opc.env),
                "ccache": lambda s: (["ccache", *corpus.compile_command(s, out / corpus.output_name(s))], ccache.env),
                "process_floor": lambda s: (["/bin/true", *corpus.compile_command(s, out / corpus.output_name(s))],
                                            opc.env)}
    for p in range(passes):
        log(f"{corpus.name}: warm hits, pass {p + 1}/{passes} (opcache exec and ccache, kernel by kernel)")
        for k, stem in enumerate(stems):
            order = ["opcache", "ccache"] if (k + p) % 2 == 0 else ["ccache", "opcache"]
            for tool in order + ["process_floor"]:
                fresh_dir(out)
                command, env = commands[tool](stem)
                seconds, minor_faults = timed_faults(command, env=env, cwd=corpus.dir)
                times[tool][stem].append(1e3 * seconds)
                faults[tool][stem].append(minor_faults)
                if tool != "process_floor":
                    corpora.check_outputs(corpus, out, [stem], f"{tool} (warm)")
    after_o, after_c = opc.stats(store), ccache.stats()
    expected = passes * len(stems)
    o_hits = counter(after_o, "hits") - counter(before_o, "hits")
    o_miss = counter(after_o, "misses") - counter(before_o, "misses")
    c_hits = after_c.get("direct_cache_hit", 0) - before_c.get("direct_cache_hit", 0)
    if o_hits != expected or o_miss:
        raise BenchError(f"opcache exec: {o_hits} hits and {o_miss} misses in the warm passes, expected {expected} hits")
    ccache_note = None
    if c_hits != expected:
        ccache_note = f"ccache counted {c_hits} direct hits of {expected} warm compiles: its figures are not hits"
        log(ccache_note)
    per_kernel = {tool: [median(v) for v in times[tool].values()] for tool in times}
    result = {"kernels": len(stems), "passes": passes, "scenario": scenario,
              "opcache_exec_ms": distribution(per_kernel["opcache"]),
              "ccache_ms": distribution(per_kernel["ccache"]) if not ccache_note else None,
              "ccache_note": ccache_note,
              "process_floor_ms": distribution(per_kernel["process_floor"]),
              "per_kernel_ms": {tool: dict(zip(stems, per_kernel[tool])) for tool in per_kernel},
              # Minor page faults per run (the process and what it waited for), median per kernel.
              "page_faults": {tool: distribution([median(v) for v in faults[tool].values()]) for tool in tools},
              "verified": {"opcache_hits": o_hits, "ccache_direct_hits": c_hits,
                           "outputs_identical_to_cold_compile": True},
              "cold": {}}
    if cold_plain_passes:
        plain = [median(v) for v in cold_plain.values()]
        result["cold"]["plain_ms"] = distribution(plain)
        result["cold"]["plain_passes"] = cold_plain_passes
    result["ratio_p50"] = ratio(result["opcache_exec_ms"]["p50"], (result["ccache_ms"] or {}).get("p50"))
    log(f"{corpus.name}: warm hit p50 opcache {result['opcache_exec_ms']['p50']:.2f} ms, "
        f"ccache {(result['ccache_ms'] or {}).get('p50', float('nan')):.2f} ms")
    return result


def fill_ccache(corpus, stems, ccache, work):
    """Compiles every stem through `ccache` (xargs -P2): misses compile and store, hits cost little."""
    stems_file = work / "fill-stems.txt"
    stems_file.write_text("".join(s + "\n" for s in stems))
    out = fresh_dir(work / "fill-out")
    _xargs(stems_file, ["ccache", *xargs_compile(corpus, out)], ccache.env, corpus.dir)
    corpora.check_outputs(corpus, out, stems, "ccache (fill)")
    stats = ccache.stats()
    return stats


def _xargs(stems_file, command, env, cwd, parallel=2):
    """`xargs -P parallel -I{} command` over the stems; returns the wall time (xargs' status checked)."""
    return timed(["xargs", "-a", stems_file, "-P", parallel, "-I{}", *command], env=env, cwd=cwd,
                 what=f"xargs -P{parallel} {' '.join(map(str, command[:3]))}…")


def fill_ccache_remote(corpus, stems, nginx_url, work):
    """Compiles every stem through ccache with its remote on nginx (WebDAV) and an empty local
    directory: remote hits when the remote already holds them, else compiles that fill it."""
    filler = Ccache(fresh_dir(work / "ccache-fill"), remote=f"{nginx_url}/ccache/")
    stats = fill_ccache(corpus, stems, filler, work)
    stored = stats.get("remote_storage_write", 0) + stats.get("remote_storage_hit", 0)
    if stored < len(stems):
        raise BenchError(f"ccache stored {stored} of {len(stems)} results on its remote {nginx_url}: {stats}")


def xargs_compile(corpus, out):
    """The compile command with {} for the stem, as xargs -I{} fills it."""
    return [*corpus.compile_args, f"src/{{}}{corpus.src_ext}", "-o", f"{out}/{{}}{corpus.out_ext}"]


def warm_start(ctx, corpus, stems, passes, serve_url, nginx_url, scenario, fill_url=None, subdir="warm-start"):
    """Empty local cache, full team cache, all stems via xargs -P2: ccache with its remote on
    nginx (`nginx_url`, WebDAV), opcache exec with layered lookup on `serve_url`, opcache pull then
    exec; interleaved passes. The URLs may be delay proxies in front of the servers (the latency
    scenario); ccache's remote is filled through `fill_url` (default `nginx_url`), a URL of the same
    server. `subdir` is the work subdirectory."""
    work = fresh_dir(ctx.work / subdir)
    stems_file = work / "stems.txt"
    stems_file.write_text("".join(s + "\n" for s in stems))
    keys_file = work / "keys.txt"
    keys_file.write_text("".join(ctx.keys[s] + "\n" for s in stems))
    fill_ccache_remote(corpus, stems, fill_url or nginx_url, work)
    opc = ctx.opcache
    out = work / "out"
    ccache = Ccache(work / "ccache", remote=f"{nginx_url}/ccache/")
    compile_tail = xargs_compile(corpus, out)

    def run_ccache():
        ccache.reset_local()
        fresh_dir(out)
        wall = _xargs(stems_file, ["ccache", *compile_tail], ccache.env, corpus.dir)
        hits = ccache.stats().get("remote_storage_hit", 0)
        if hits != len(stems):
            raise BenchError(f"ccache warm start: {hits} remote hits for {len(stems)} compiles")
        return wall, {"remote_hits": hits}

    def exec_all(store, remote):
        cmd = opc.cmd(store, "exec", "--desc", "desc/{}.json", "--scenario", scenario, "--out", out,
                      "--output", f"{{}}{corpus.out_ext}", "--", *compile_tail, remote=remote)
        return _xargs(stems_file, cmd, opc.env, corpus.dir)

    def check_store(store, what):
        stats = opc.stats(store)
        # At least the run's kernels: a layered lookup prefetches the whole
        # scenario, which may hold more kernels than this run compiles.
        if counter(stats, "misses") or stats["entries"] < len(stems):
            raise BenchError(f"{what}: local store holds {stats['entries']} entries with "
                             f"{counter(stats, 'misses')} misses, expected at least {len(stems)} entries and no miss")
        return {"local_entries": stats["entries"], "local_hits": counter(stats, "hits")}

    def run_layered():
        store = fresh_dir(work / "store-layered")
        fresh_dir(out)
        wall = exec_all(store, serve_url)
        return wall, check_store(store, "opcache layered warm start")

    pull_walls = []

    def run_pull_exec():
        store = fresh_dir(work / "store-pull")
        fresh_dir(out)
        start = time.perf_counter()
        pulled = json.loads(run(opc.cmd(store, "--json", "pull", "--keys", keys_file, remote=serve_url), env=opc.env))
        pull_wall = time.perf_counter() - start
        if pulled.get("transferred") != len(stems) or pulled.get("failed"):
            raise BenchError(f"opcache pull: {pulled}")
        pull_walls.append(pull_wall)
        wall = pull_wall + exec_all(store, serve_url)
        return wall, {**check_store(store, "opcache pull + exec"), "pull_seconds": pull_wall}

    def run_process_floor():
        # 300 processes that do nothing, started by xargs -P2 as the tools are: the least any
        # warm start that runs a process per kernel can take on this machine.
        return _xargs(stems_file, ["/bin/true", *compile_tail], opc.env, corpus.dir), {}

    def run_layout_floor():
        # The process floor plus the file-system work alone of keeping the run's bundles in
        # the store's layout (write_store_layout: objects, key records, shard directories; no
        # network, no verification, no index): the least a warm start that keeps what it
        # fetched in this layout, as the design's local store does, can take on this machine.
        root = work / "layout-floor"
        shutil.rmtree(root, ignore_errors=True)
        start = time.perf_counter()
        write_store_layout(root, [ctx.bundle_bytes[ctx.keys[s]] for s in stems])
        layout = time.perf_counter() - start
        return layout + run_process_floor()[0], {"layout_seconds": layout}

    methods = {"ccache_nginx": run_ccache, "opcache_layered": run_layered, "opcache_pull_exec": run_pull_exec,
               "process_floor": run_process_floor, "layout_floor": run_layout_floor}
    walls = {m: [] for m in methods}
    checks = {}
    names = list(methods)
    for p in range(passes):
        order = names[p % len(names):] + names[:p % len(names)]
        log(f"warm start pass {p + 1}/{passes}: {', '.join(order)} ({len(stems)} kernels, xargs -P2)")
        for m in order:
            wall, checks[m] = methods[m]()
            if m not in ("process_floor", "layout_floor"):
                corpora.check_outputs(corpus, out, stems, m)
            walls[m].append(wall)
            log(f"  {m}: {wall:.3f} s")
    result = {"kernels": len(stems), "passes": passes, "parallel": 2,
              "seconds": {m: median(v) for m, v in walls.items()}, "all_seconds": walls, "verified": checks}
    base = result["seconds"]["ccache_nginx"]
    result["speedup_vs_ccache"] = {m: ratio(base, result["seconds"][m]) for m in ("opcache_layered", "opcache_pull_exec")}
    result["pull_seconds"] = median(pull_walls)
    return result


# The system calls the tracer's seccomp filter stops a tracee on (trace/syscall_table.cpp; readlink
# and readlinkat are in the table but not watched, k_watch_readlink). strace counts them in the
# plain compile: about one seccomp stop each, plus a stop per fork, exec and exit of the tree.
TRACED_SYSCALLS = ("access,chdir,creat,execve,execveat,faccessat,faccessat2,getdents,getdents64,link,linkat,"
                   "lstat,mkdir,mkdirat,mknod,mknodat,newfstatat,open,openat,openat2,rename,renameat,renameat2,"
                   "rmdir,stat,statx,symlink,symlinkat,truncate,unlink,unlinkat")


def _strace_counts(command, cwd, env, work):
    """`strace -f -c` of `command` restricted to the traced system calls: {syscall: calls} and the
    processes of the tree (execve count), or None without strace."""
    if not shutil.which("strace"):
        return None
    report = work / "strace-c.txt"
    run(["strace", "-f", "-c", "-o", report, "-e", f"trace={TRACED_SYSCALLS}", *command], env=env, cwd=cwd,
        stdout=subprocess.DEVNULL, what="strace -c of the plain compile")
    calls = {}
    for line in report.read_text().splitlines():
        fields = line.split()
        # usecs/call lines: % time, seconds, usecs/call, calls, [errors], syscall
        if len(fields) >= 5 and fields[0][0].isdigit() and fields[-1] != "total":
            try:
                calls[fields[-1]] = int(fields[3])
            except ValueError:
                pass
    return calls


def traced_miss(ctx, corpus, stems, passes, scenario, seed_stem):
    """The traced miss against the untraced compile, per kernel, interleaved with the order rotated
    kernel by kernel and pass by pass: `gcc -O2 -c` alone; `opcache exec` into an EMPTY store (a
    miss: the compile runs under the tracer, the entry and the exec manifest are stored, and every
    file the compile read is digested, cc1 and its libraries included); `opcache exec` into a
    store that already holds one other kernel (`seed_stem`, stored untimed at the start of each
    pass): still a miss, but the digests of the compiler's files are remembered (the store's
    digests/), as in any store after its first compile; `opcache --mode disable exec` (the same
    CLI, the compile run untraced, nothing looked up or stored) to split opcache's own start from
    the tracer and the store's work; `bench_trace_floor` (the compile under the tracer exec runs a
    miss under, preload library included, and nothing else: no options, key, lookup, digests or
    store) for what the tracer alone adds; `bench_notify_floor` (the same filter and preload library,
    each notified call answered at once and unread, no ptrace) for what the mechanism itself costs.
    Every miss must add exactly one entry and no hit; every
    output must equal the cold compile's bytes. Each run has an output directory and a store of
    its own, and nothing is deleted until the last pass is over: on an ext4 without a journal
    (this machine's root) creating a file within seconds of other deletions in its block group
    costs 0.2-2 ms instead of ~0.02 ms (the inode allocator skips recently freed inodes), so
    deleting a store per kernel made the next runs' file creations, gcc's temporary file and
    opcache's entry alike, the harness's cost. Returns the figures."""
    work = fresh_dir(ctx.work / f"miss-{corpus.name}")
    outs = work / "out"
    stores = work / "stores"
    opc = ctx.opcache
    tools = ("gcc", "opcache_miss", "opcache_miss_seeded", "opcache_disable", "trace_floor", "notify_floor")
    floor_programs = {tool: ctx.build / "bench" / f"bench_{tool}" for tool in ("trace_floor", "notify_floor")}
    floor_env = dict(opc.env, OPCACHE_TRACE_PRELOAD=str(ctx.build / "libopcache-trace-preload.so"))
    if seed_stem in stems:
        raise BenchError(f"the seed kernel {seed_stem} must not be one of the measured kernels")

    def miss_command(stem, store, out):
        return opc.exec_cmd(store, corpus, stem, out, scenario)

    def disable_command(stem, store, out):
        command = opc.exec_cmd(store, corpus, stem, out, scenario)
        command.insert(command.index("exec"), "disable")
        command.insert(command.index("disable"), "--mode")
        return command

    times = {tool: {s: [] for s in stems} for tool in tools}
    checked = 0
    for p in range(passes):
        log(f"{corpus.name}: traced miss, pass {p + 1}/{passes} (gcc, opcache exec miss into an empty store, "
            f"the same into a store seeded with {seed_stem}, opcache --mode disable exec, the tracer alone, "
            f"the mechanism alone; {len(stems)} kernels)")
        seeded = stores / f"seeded-{p}"
        shutil.rmtree(seeded, ignore_errors=True)
        with tempfile.TemporaryDirectory(prefix="opcache-seed-") as seed_out:
            run(opc.exec_cmd(seeded, corpus, seed_stem, Path(seed_out), scenario), env=opc.env, cwd=corpus.dir,
                what=f"opcache exec {seed_stem} (seeding)")
        seeded_entries = opc.stats(seeded)["entries"]
        for k, stem in enumerate(stems):
            order = list(tools[(k + p) % len(tools):] + tools[:(k + p) % len(tools)])
            for tool in order:
                out = fresh_dir(outs / f"{tool}-{p}-{k}")
                store = stores / f"{tool}-{p}-{k}"
                if tool == "opcache_miss_seeded":
                    command, env = miss_command(stem, seeded, out), opc.env
                elif tool == "gcc":
                    command, env = corpus.compile_command(stem, out / corpus.output_name(stem)), opc.env
                elif tool == "opcache_miss":
                    command, env = miss_command(stem, store, out), opc.env
                elif tool in floor_programs:
                    command = [str(floor_programs[tool])] + corpus.compile_command(stem, out / corpus.output_name(stem))
                    env = floor_env
                else:
                    command, env = disable_command(stem, store, out), opc.env
                times[tool][stem].append(1e3 * timed(command, env=env, cwd=corpus.dir, what=f"{tool} {stem}"))
                corpora.check_outputs(corpus, out, [stem], tool)
                if tool == "opcache_miss":
                    stats = opc.stats(store)
                    if stats["entries"] != 1 or counter(stats, "hits"):
                        raise BenchError(f"opcache exec into an empty store ({stem}): {stats['entries']} entries, "
                                         f"{counter(stats, 'hits')} hits; expected one stored entry and no hit")
                    if not any((store / "manifests").rglob("*")):
                        raise BenchError(f"opcache exec miss ({stem}) stored no exec manifest in {store}/manifests")
                    checked += 1
                if tool == "opcache_miss_seeded":
                    stats = opc.stats(seeded)
                    if stats["entries"] != seeded_entries + 1 or counter(stats, "hits"):
                        raise BenchError(f"opcache exec into the seeded store ({stem}): {stats['entries']} entries "
                                         f"(was {seeded_entries}), {counter(stats, 'hits')} hits; expected a miss")
                    seeded_entries += 1
                    checked += 1
    per_kernel = {tool: [median(v) for v in times[tool].values()] for tool in tools}
    ratios = [m / g for m, g in zip(per_kernel["opcache_miss"], per_kernel["gcc"])]
    disable_ratios = [d / g for d, g in zip(per_kernel["opcache_disable"], per_kernel["gcc"])]
    tracer_ratios = [m / d for m, d in zip(per_kernel["opcache_miss"], per_kernel["opcache_disable"])]
    extra = [m - g for m, g in zip(per_kernel["opcache_miss"], per_kernel["gcc"])]
    start_cost = [d - g for d, g in zip(per_kernel["opcache_disable"], per_kernel["gcc"])]
    traced_cost = [m - d for m, d in zip(per_kernel["opcache_miss"], per_kernel["opcache_disable"])]
    seeded_ratios = [m / g for m, g in zip(per_kernel["opcache_miss_seeded"], per_kernel["gcc"])]
    seeded_vs_disable = [m / d for m, d in zip(per_kernel["opcache_miss_seeded"], per_kernel["opcache_disable"])]
    digest_cost = [m - s for m, s in zip(per_kernel["opcache_miss"], per_kernel["opcache_miss_seeded"])]
    seeded_cost = [m - d for m, d in zip(per_kernel["opcache_miss_seeded"], per_kernel["opcache_disable"])]
    floor_ratios = [f / g for f, g in zip(per_kernel["trace_floor"], per_kernel["gcc"])]
    floor_cost = [f - g for f, g in zip(per_kernel["trace_floor"], per_kernel["gcc"])]
    notify_ratios = [f / g for f, g in zip(per_kernel["notify_floor"], per_kernel["gcc"])]
    notify_cost = [f - g for f, g in zip(per_kernel["notify_floor"], per_kernel["gcc"])]
    stem0 = stems[0]
    syscalls = _strace_counts(corpus.compile_command(stem0, fresh_dir(outs / "strace") / corpus.output_name(stem0)),
                              corpus.dir, opc.env, work)
    shutil.rmtree(stores, ignore_errors=True)  # the measurements are over (see the docstring)
    shutil.rmtree(outs, ignore_errors=True)
    result = {"kernels": len(stems), "passes": passes, "scenario": scenario,
              "gcc_ms": distribution(per_kernel["gcc"]),
              "opcache_miss_ms": distribution(per_kernel["opcache_miss"]),
              "opcache_disable_ms": distribution(per_kernel["opcache_disable"]),
              "opcache_miss_seeded_ms": distribution(per_kernel["opcache_miss_seeded"]),
              "trace_floor_ms": distribution(per_kernel["trace_floor"]),
              "notify_floor_ms": distribution(per_kernel["notify_floor"]),
              "seed_kernel": seed_stem,
              # Per kernel: the medians' ratio, then its distribution over the kernels (the headline is p50).
              "ratio_miss_vs_gcc": distribution(ratios),
              "ratio_disable_vs_gcc": distribution(disable_ratios),
              "ratio_miss_vs_disable": distribution(tracer_ratios),
              "ratio_miss_seeded_vs_gcc": distribution(seeded_ratios),
              "ratio_miss_seeded_vs_disable": distribution(seeded_vs_disable),
              "ratio_trace_floor_vs_gcc": distribution(floor_ratios),
              "ratio_notify_floor_vs_gcc": distribution(notify_ratios),
              "extra_ms": {"miss_minus_gcc": distribution(extra),
                           "disable_minus_gcc (opcache's start, untraced)": distribution(start_cost),
                           "miss_minus_disable (tracer, key, store, manifest)": distribution(traced_cost),
                           "miss_minus_miss_seeded (digesting the compiler's files)": distribution(digest_cost),
                           "miss_seeded_minus_disable (tracer, key, store, manifest; digests known)":
                               distribution(seeded_cost),
                           "trace_floor_minus_gcc (the tracer alone)": distribution(floor_cost),
                           "notify_floor_minus_gcc (the mechanism alone)": distribution(notify_cost)},
              "per_kernel_ms": {tool: dict(zip(stems, per_kernel[tool])) for tool in tools},
              "all_ms": times,
              "traced_syscalls_of_plain_compile": syscalls and {"kernel": stem0, "calls": syscalls,
                                                                "total": sum(syscalls.values())},
              "verified": {"misses_storing_one_entry": checked,
                           "outputs_identical_to_cold_compile": True}}
    result["ratio_p50"] = result["ratio_miss_vs_gcc"]["p50"]
    log(f"{corpus.name}: traced miss p50 {result['opcache_miss_ms']['p50']:.1f} ms, gcc {result['gcc_ms']['p50']:.1f} ms, "
        f"--mode disable {result['opcache_disable_ms']['p50']:.1f} ms, miss into a seeded store "
        f"{result['opcache_miss_seeded_ms']['p50']:.1f} ms; per kernel p50: miss/gcc {result['ratio_p50']:.3f}, "
        f"seeded miss/gcc {result['ratio_miss_seeded_vs_gcc']['p50']:.3f}, "
        f"tracer alone/gcc {result['ratio_trace_floor_vs_gcc']['p50']:.3f}, "
        f"mechanism alone/gcc {result['ratio_notify_floor_vs_gcc']['p50']:.3f}")
    return result
