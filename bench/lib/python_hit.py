#!/usr/bin/python3
"""The Python binding's hit: `opcache.Store.get_or_build` of the kernel that bench_store's
"get_or_build hit" figure stored, timed the same way (bench/run, scenario python_hit).

Reads bench_store's JSON (`bench_store --get-or-build-only --work DIR --json FILE`), opens a
Store on the same cache directory with the same settings, and times `--hits` calls (default:
as many as bench_store timed, after as many unmeasured warm-up calls) of
`store.get_or_build(descriptor, scenario, out_dir, build)` into bench_store's out_dir, whose
kernel files are removed (untimed) after every call, exactly like the C++ side; the scenario
is bench_store's spec string. Two descriptor forms, alternating call by call (the order
swapped every round): the JSON text bench_store passed (a str: the same input as the C++ call,
the headline figure) and that text parsed into a dict (as an op compiler holding a dict would
call; the binding serialises it on every call). Exits 1 when any call is not a hit (the
result's source), when the build function runs, or when a call writes other bytes than the
corpus's files; the figures go to --json.

Run with Debian's python3, the binding on the path and the library named:

    PYTHONPATH=python OPCACHE_LIBRARY=build-bench/libopcache.so \\
        /usr/bin/python3 bench/lib/python_hit.py --bench-store-json FILE --json OUT

Standard library and the binding only; nothing is downloaded.
"""
import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import opcache


class NotAHit(Exception):
    """A call that did not do what a hit must."""


def nearest_rank(ordered, q):
    """The nearest-rank quantile q of sorted samples, as bench_store computes it."""
    return ordered[min(max(math.ceil(q * len(ordered)), 1), len(ordered)) - 1]


def percentiles(samples):
    """{"samples", "mean_us", "p50_us", "p90_us", "p99_us", "max_us"}, like bench_store's Percentiles."""
    ordered = sorted(samples)
    return {"samples": len(ordered), "mean_us": sum(ordered) / len(ordered),
            "p50_us": nearest_rank(ordered, 0.50), "p90_us": nearest_rank(ordered, 0.90),
            "p99_us": nearest_rank(ordered, 0.99), "max_us": ordered[-1]}


class HitTimer:
    """Times get_or_build hits of one stored kernel into out_dir; every call must be a hit."""

    def __init__(self, store, figure):
        self.store = store
        self.descriptors = {"text": figure["descriptor_json"], "dict": json.loads(figure["descriptor_json"])}
        self.scenario = figure["scenario"]
        self.key = figure["key"]
        self.out_dir = Path(figure["out_dir"])
        self.sources = [Path(path) for path in figure["sources"]]
        self.builds = 0

    def build(self, work_dir):
        self.builds += 1
        raise NotAHit(f"the build function ran (work dir {work_dir}): the kernel {self.key} was not a hit")

    def check(self, result):
        if result.source != "hit" or self.builds:
            raise NotAHit(f"get_or_build of {self.key} returned source {result.source!r}, not 'hit'")
        if result.key != self.key:
            raise NotAHit(f"get_or_build returned key {result.key}; bench_store stored {self.key}")
        names = sorted(source.name for source in self.sources)
        if [path.name for path in result.files] != names:
            raise NotAHit(f"get_or_build of {self.key} wrote {[str(p) for p in result.files]}, not {names}")

    def same_bytes(self):
        for source in self.sources:
            if (self.out_dir / source.name).read_bytes() != source.read_bytes():
                raise NotAHit(f"get_or_build wrote a different {self.out_dir / source.name} than {source}")

    def remove_outputs(self):
        for source in self.sources:
            os.unlink(self.out_dir / source.name)

    def once(self, descriptor):
        """One call: (wall µs, thread CPU µs); the result is checked afterwards."""
        cpu0 = time.thread_time_ns()
        t0 = time.perf_counter_ns()
        result = self.store.get_or_build(descriptor, self.scenario, self.out_dir, self.build)
        t1 = time.perf_counter_ns()
        cpu1 = time.thread_time_ns()
        self.check(result)
        return (t1 - t0) / 1000, (cpu1 - cpu0) / 1000

    def run(self, warmup, hits):
        """{form: ([wall µs], [thread CPU µs])} of `hits` calls per descriptor form, after `warmup`
        rounds; each round calls every form once, in alternating order."""
        samples = {form: ([], []) for form in self.descriptors}
        forms = list(self.descriptors)
        for i in range(warmup + hits):
            for form in (forms if i % 2 == 0 else forms[::-1]):
                wall, cpu = self.once(self.descriptors[form])
                if i == 0 or i + 1 == warmup + hits:
                    self.same_bytes()
                self.remove_outputs()
                if i >= warmup:
                    samples[form][0].append(wall)
                    samples[form][1].append(cpu)
        return samples


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bench-store-json", type=Path, required=True,
                        help="bench_store's --json output with a get_or_build_hit figure")
    parser.add_argument("--json", type=Path, required=True, help="write the figures here")
    parser.add_argument("--hits", type=int, help="timed calls (default: bench_store's count)")
    args = parser.parse_args(argv)
    figure = json.loads(args.bench_store_json.read_text()).get("get_or_build_hit")
    if not isinstance(figure, dict):
        parser.error(f"{args.bench_store_json} has no get_or_build_hit object (bench_store --get-or-build-only)")
    hits = args.hits or figure["hits"]
    if hits < 1:
        parser.error("--hits must be at least 1")
    # The settings bench_store opened its store with: the built-in volatile fields.
    with opcache.Store(figure["store_dir"], volatile_fields="") as store:
        timer = HitTimer(store, figure)
        try:
            samples = timer.run(figure["warmup"], hits)
        except NotAHit as error:
            print(f"python_hit.py: error: {error}", file=sys.stderr)
            return 1
    result = {"what": "opcache.Store.get_or_build hits (Python binding, ctypes) of bench_store's stored kernel, "
                      "in one process, all into its out_dir, whose kernel files are removed (untimed) after every "
                      "call; the descriptor as bench_store's JSON text (the flat figures) and as a dict, alternating",
              "python": sys.executable, "python_version": sys.version.split()[0],
              "library": opcache.library_path, "opcache_version": opcache.version(),
              "kernel": figure["kernel"], "key": figure["key"], "store_dir": figure["store_dir"],
              "out_dir": figure["out_dir"], "hits": hits, "warmup": figure["warmup"], "builds_during_hits": timer.builds}
    for form, (walls, cpus) in samples.items():
        wall = percentiles(walls)
        result[f"descriptor_{form}"] = {"wall": wall, "thread_cpu": percentiles(cpus),
                                        "p50_us": wall["p50_us"], "p99_us": wall["p99_us"]}
        print(f"python_hit.py: {hits} hits of {figure['kernel']}, descriptor as {form}: p50 {wall['p50_us']:.1f} us, "
              f"p99 {wall['p99_us']:.1f} us", file=sys.stderr)
    result.update(result["descriptor_text"])
    args.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
