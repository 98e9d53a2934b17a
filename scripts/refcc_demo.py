#!/usr/bin/env python3
"""The opcache demo on refcc, the reference op compiler (README's main job).

Compiles a model's op list (examples/models/*.json) with refcc, which caches
every kernel through opcache's get_or_build:

  1. cold      one process, empty cache: every distinct kernel is compiled;
  2. warm      the same again: every kernel is a cache hit;
  3. 8 ranks   8 processes at once on another empty cache, as the ranks of a
               multi-device job do: single flight builds each kernel once and
               the other ranks wait for it;
  4. export    `opcache export --layout mindspore --ranks 8` writes every
               kernel into rank_*/kernel_meta (decompressed once, hard-linked);
  5. integrity one stored object is corrupted: `opcache verify` reports it and
               the next compile rebuilds that kernel instead of serving it.

and prints a table of wall times, builds, hits and compile time saved. The
same steps, repeated, are the refcc scenario of bench/run (--repeat,
--json). Standard library only.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


class DemoError(Exception):
    """A step did not do what the demo promises; the message says what."""


def run(command, env=None, check=True):
    """Runs `command`, returning (exit code, stdout); raises DemoError on failure when `check`."""
    done = subprocess.run(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if check and done.returncode != 0:
        raise DemoError(f"{' '.join(map(str, command))} exited {done.returncode}:\n{done.stderr.strip()}")
    return done.returncode, done.stdout


def hermetic_env(**extra):
    """The environment without opcache/Ascend settings of the caller, plus `extra`."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OPCACHE_", "ASCEND_", "RANK_", "MS_")) and k not in ("DEVICE_ID", "LOCAL_WORLD_SIZE")}
    env.update({k: str(v) for k, v in extra.items()})
    return env


class Tools:
    """The built binaries and the model being compiled."""

    def __init__(self, build: Path, model: Path):
        self.refcc = build / "refcc" / "refcc"
        self.opcache = build / "opcache"
        self.model = model
        for binary in (self.refcc, self.opcache):
            if not os.access(binary, os.X_OK):
                raise DemoError(f"{binary} is missing: build first (scripts/build.sh)")
        if not model.is_file():
            raise DemoError(f"model op list {model} not found (see examples/models/)")

    def refcc_model(self, cache: Path, out: Path, env, device_id=0, no_cache=False):
        """Starts `refcc model` (JSON report on stdout); returns the Popen."""
        command = [str(self.refcc), "model", str(self.model), "--out", str(out), "--json",
                   "--device-id", str(device_id)]
        command += ["--no-cache"] if no_cache else ["--cache-dir", str(cache)]
        return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def stats(self, cache: Path):
        return json.loads(run([str(self.opcache), "-C", str(cache), "--json", "stats"], env=hermetic_env())[1])


def finish(process, what):
    """Waits for a `refcc model` process and returns its JSON report."""
    out, err = process.communicate()
    if process.returncode != 0:
        raise DemoError(f"{what}: refcc exited {process.returncode}:\n{err.strip()}")
    return json.loads(out)


def single_compile(tools, cache, out, no_cache=False, env=None):
    """One `refcc model` process; returns (wall seconds, report)."""
    start = time.monotonic()
    report = finish(tools.refcc_model(cache, out, env or hermetic_env(), no_cache=no_cache), str(out))
    return time.monotonic() - start, report


def ranks_compile(tools, cache, root, ranks):
    """`ranks` refcc processes at once (RANK_SIZE=ranks, RANK_ID=DEVICE_ID=i); returns (wall, reports)."""
    start = time.monotonic()
    processes = [tools.refcc_model(cache, root / f"rank_{i}" / "kernel_meta",
                                   hermetic_env(RANK_SIZE=ranks, RANK_ID=i, DEVICE_ID=i), device_id=i)
                 for i in range(ranks)]
    reports = [finish(p, f"rank {i}") for i, p in enumerate(processes)]
    return time.monotonic() - start, reports


def export_ranks(tools, cache, target, ranks):
    """`opcache export --layout mindspore --ranks N`; returns (wall, files written under target)."""
    start = time.monotonic()
    run([str(tools.opcache), "-C", str(cache), "export", str(target), "--layout", "mindspore",
         "--ranks", str(ranks)], env=hermetic_env())
    wall = time.monotonic() - start
    return wall, sum(1 for p in target.rglob("*") if p.is_file())


def corrupt_one_object(cache: Path):
    """Flips one byte in the middle of one stored object; returns its path."""
    victim = sorted((cache / "objects").rglob("*"), key=str)
    victim = [p for p in victim if p.is_file()][0]
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0xFF
    victim.write_bytes(bytes(data))
    return victim


def run_once(tools, work: Path, ranks: int, with_baseline: bool):
    """All steps in fresh directories under `work`; returns the measurements."""
    result = {}
    if with_baseline:
        wall, report = single_compile(tools, None, work / "nocache" / "kernel_meta", no_cache=True)
        result["no_cache"] = {"wall_s": wall, "builds": report["builds"] + report["bypassed"]}

    cache_a = work / "cache-single"
    wall, report = single_compile(tools, cache_a, work / "cold" / "kernel_meta")
    result["kernels"] = report["distinct_kernels"]
    result["ops"] = report["ops"]
    result["cold"] = {"wall_s": wall, "builds": report["builds"], "hits": report["hits"],
                      "build_s": report["build_ms"] / 1000}
    wall, report = single_compile(tools, cache_a, work / "warm" / "kernel_meta")
    saved = tools.stats(cache_a)["counters"].get("compile_ms_saved", 0) / 1000
    result["warm"] = {"wall_s": wall, "builds": report["builds"], "hits": report["hits"], "saved_s": saved}

    cache_b = work / "cache-ranks"
    wall, reports = ranks_compile(tools, cache_b, work / "ranks", ranks)
    counters = tools.stats(cache_b)["counters"]
    result["ranks"] = {"ranks": ranks, "wall_s": wall,
                       "builds": sum(r["builds"] for r in reports), "hits": sum(r["hits"] for r in reports),
                       "failed": sum(r["failed"] for r in reports),
                       "saved_s": counters.get("compile_ms_saved", 0) / 1000,
                       "builds_per_key": sum(r["builds"] for r in reports) / max(1, result["kernels"])}

    wall, files = export_ranks(tools, cache_b, work / "export", ranks)
    result["export"] = {"wall_s": wall, "files": files}
    return result


def integrity_step(tools, work: Path, ranks: int):
    """Corrupts one object of the multi-rank cache, shows verify and rank 0 recompiling; returns what happened."""
    cache = work / "cache-ranks"
    corrupt_one_object(cache)
    verify_status, _ = run([str(tools.opcache), "-C", str(cache), "verify"], env=hermetic_env(), check=False)
    wall, report = single_compile(tools, cache, work / "after-corruption" / "kernel_meta",
                                  env=hermetic_env(RANK_SIZE=ranks, RANK_ID=0, DEVICE_ID=0))
    return {"verify_exit": verify_status, "wall_s": wall, "builds": report["builds"], "hits": report["hits"]}


def check_promises(result, ranks):
    """The properties the demo shows; raises DemoError when one does not hold."""
    kernels = result["kernels"]
    if result["cold"]["builds"] != kernels or result["warm"]["hits"] != kernels:
        raise DemoError(f"cold should build and warm should hit all {kernels} kernels: {result}")
    if result["ranks"]["builds"] != kernels or result["ranks"]["failed"]:
        raise DemoError(f"{ranks} ranks should build each of the {kernels} kernels exactly once: {result['ranks']}")
    if result["export"]["files"] != 3 * kernels * ranks:
        raise DemoError(f"export should write {3 * kernels * ranks} files, wrote {result['export']['files']}")


def median_result(results):
    """Per-field medians over repeated runs (counts are identical across runs)."""
    def merge(values):
        if isinstance(values[0], dict):
            return {k: merge([v[k] for v in values]) for k in values[0]}
        return statistics.median(values) if isinstance(values[0], float) else values[0]
    return merge(results)


def table(result, model_name):
    """The human-readable report."""
    k, r = result["kernels"], result["ranks"]
    rows = [("step", "wall", "builds", "hits", "compile time saved")]
    if "no_cache" in result:
        rows.append(("no cache (refcc --no-cache)", f"{result['no_cache']['wall_s']:.2f} s",
                     str(result["no_cache"]["builds"]), "-", "-"))
    rows += [
        ("cold (1 process, empty cache)", f"{result['cold']['wall_s']:.2f} s", str(result["cold"]["builds"]),
         str(result["cold"]["hits"]), "-"),
        ("warm (1 process)", f"{result['warm']['wall_s']:.2f} s", str(result["warm"]["builds"]),
         str(result["warm"]["hits"]), f"{result['warm']['saved_s']:.1f} s"),
        (f"{r['ranks']} ranks at once, empty cache", f"{r['wall_s']:.2f} s", str(r["builds"]), str(r["hits"]),
         f"{r['saved_s']:.1f} s"),
        (f"export to rank_0..{r['ranks'] - 1}/kernel_meta", f"{result['export']['wall_s']:.2f} s", "-", "-", "-"),
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [f"{model_name}: {result['ops']} ops, {k} distinct kernels"]
    for n, row in enumerate(rows):
        lines.append("  " + "  ".join(cell.ljust(widths[i]) if i == 0 else cell.rjust(widths[i])
                                      for i, cell in enumerate(row)))
        if n == 0:
            lines.append("  " + "  ".join("-" * w for w in widths))
    lines.append(f"  warm is {result['cold']['wall_s'] / result['warm']['wall_s']:.1f}x faster than cold; "
                 f"{r['ranks']} ranks built each kernel {r['builds_per_key']:.2f} times "
                 f"and wrote {result['export']['files']} files on export")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", type=Path, default=REPO / "build", help="build directory (default: build/)")
    parser.add_argument("--model", default="transformer_block",
                        help="a model of examples/models (name) or a model op list file (default: transformer_block)")
    parser.add_argument("--ranks", type=int, default=8, help="ranks compiling at once (default: 8)")
    parser.add_argument("--repeat", type=int, default=1, help="repeat all steps and report medians (default: 1)")
    parser.add_argument("--baseline", action="store_true", help="also compile once with refcc --no-cache")
    parser.add_argument("--json", type=Path, help="also write the measurements to this file")
    parser.add_argument("--keep", action="store_true", help="keep the work directory and print its path")
    args = parser.parse_args()
    if args.ranks < 1 or args.repeat < 1:
        parser.error("--ranks and --repeat must be at least 1")
    model = Path(args.model) if args.model.endswith(".json") else REPO / "examples" / "models" / f"{args.model}.json"

    try:
        tools = Tools(args.build, model)
        work = Path(tempfile.mkdtemp(prefix="opcache-demo-"))
        try:
            results = []
            for n in range(args.repeat):
                if args.repeat > 1:
                    print(f"run {n + 1}/{args.repeat} ...", file=sys.stderr, flush=True)
                run_dir = work / f"run{n}"
                results.append(run_once(tools, run_dir, args.ranks, args.baseline))
                check_promises(results[-1], args.ranks)
            result = median_result(results)
            result["model"] = model.stem
            result["repeat"] = args.repeat
            print(table(result, model.stem))
            integrity = integrity_step(tools, work / "run0", args.ranks)
            result["integrity"] = integrity
            print(f"\nintegrity: one stored object corrupted; opcache verify exits {integrity['verify_exit']} "
                  f"(3 = integrity failure); the next compile rebuilt {integrity['builds']} kernel and "
                  f"served {integrity['hits']} from the cache — a damaged kernel is never handed out")
            if integrity["verify_exit"] != 3 or integrity["builds"] != 1:
                raise DemoError(f"corruption should be reported and exactly one kernel rebuilt: {integrity}")
            if args.json:
                args.json.parent.mkdir(parents=True, exist_ok=True)
                args.json.write_text(json.dumps(result, indent=2) + "\n")
        finally:
            if args.keep:
                print(f"work directory kept: {work}")
            else:
                shutil.rmtree(work, ignore_errors=True)
    except DemoError as error:
        print(f"refcc_demo: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
