"""Replicas over one bucket (docs/operations.md "Replicas"): the warm start of N machines
that pull the same kernels at once from 1 and from 3 `opcache serve` replicas over the same
s3:// storage (moto), each machine on replica i % count, as a load balancer would spread them;
and the same with --redirect-downloads, where the bytes come from the bucket. Reported per
setup: the wall time of the whole warm start, the kernels and requests per second the
replicas answered, and the replicas' CPU per kernel downloaded (summed over the replicas, from
/proc as redirect_bench does).

moto_server (Python) is the bucket here, and it is slower than any real object store: the
figures compare the setups with each other on one machine, they are not a capacity of S3.

Run on its own (needs moto_server in PATH and a build with opcache and opcache-serve):
  python3 bench/lib/replica_bench.py --build build-bench --machines 8 --kernels 48
"""
import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import Cleanup, clean_env, log, run  # noqa: E402
from peers import OpcacheServe  # noqa: E402
from redirect_bench import put_kernels, server_cpu, start_moto  # noqa: E402

TOKEN = "bench-replica-token"


def start_replicas(cleanup, opcache: Path, storage: str, work: Path, count: int, tokens: Path, redirect: bool):
    extra = ["--tokens", tokens] + (["--redirect-downloads"] if redirect else [])
    return [OpcacheServe(cleanup, opcache, storage, work / f"replica-{i}", 1, extra=extra + ["--replica", f"r{i}"])
            for i in range(count)]


def warm_start(opcache: Path, replicas, work: Path, machines: int):
    """Every machine (a fresh cache directory) pulls every kernel at once; returns the wall seconds."""
    env = clean_env(OPCACHE_TOKEN=TOKEN)
    started = time.perf_counter()
    processes = []
    for machine in range(machines):
        cache = work / f"machine-{machine}"
        subprocess.run(["rm", "-rf", str(cache)], check=True)
        url = replicas[machine % len(replicas)].url
        processes.append(subprocess.Popen([str(opcache), "--cache-dir", str(cache), "--remote", url, "pull"],
                                          env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
    for process in processes:
        _, err = process.communicate()
        if process.returncode != 0:
            raise RuntimeError(f"opcache pull exited {process.returncode}: {err.decode()[-600:]}")
    return time.perf_counter() - started


def replica_figures(build: Path, work: Path, cleanup, machines=8, kernels=48, size=65536, passes=3):
    work.mkdir(parents=True, exist_ok=True)
    os.environ.update(AWS_ACCESS_KEY_ID="AKIDBENCH", AWS_SECRET_ACCESS_KEY="bench/secret")
    os.environ.pop("AWS_SESSION_TOKEN", None)
    os.environ.pop("AWS_PROFILE", None)
    opcache = build / "opcache"
    moto = start_moto(cleanup, work / "moto")
    tokens = work / "tokens"
    tokens.write_text(hashlib.sha256(TOKEN.encode()).hexdigest() + " bench read,write\n")
    storage = f"s3://opcache-bench/replicas?endpoint={moto}"
    cache, _ = put_kernels(opcache, work, size, kernels)
    seeder = OpcacheServe(cleanup, opcache, storage, work / "seed", 1, extra=["--tokens", tokens])
    run([opcache, "--cache-dir", cache, "--remote", seeder.url, "push"], env=clean_env(OPCACHE_TOKEN=TOKEN),
        what="opcache push")
    cleanup.stop(seeder.process)
    figures = {"machines": machines, "kernels": kernels, "bundle_object_bytes": size, "passes": passes, "setups": {}}
    for count, redirect in ((1, False), (3, False), (1, True), (3, True)):
        name = f"{count}_replica{'s' if count > 1 else ''}{'_redirect' if redirect else ''}"
        replicas = start_replicas(cleanup, opcache, storage, work / name, count, tokens, redirect)
        warm_start(opcache, replicas, work / name, machines)  # warm-up: connections, moto's first requests
        samples = []
        for _ in range(passes):
            before = [server_cpu(r.process.pid)[0] for r in replicas]
            wall = warm_start(opcache, replicas, work / name, machines)
            after = [server_cpu(r.process.pid)[0] for r in replicas]
            cpu_us = sum(a - b for a, b in zip(after, before)) / 1000
            samples.append((wall, cpu_us))
        wall = statistics.median(s[0] for s in samples)
        cpu_us = statistics.median(s[1] for s in samples)
        downloads = machines * kernels
        figures["setups"][name] = {"replicas": count, "redirect_downloads": redirect,
                                   "warm_start_s": round(wall, 3),
                                   "kernels_per_s": round(downloads / wall, 1),
                                   "server_cpu_us_per_kernel": round(cpu_us / downloads, 1)}
        log(f"replicas: {name}: warm start of {machines} machines x {kernels} kernels {wall:.2f} s, "
            f"{downloads / wall:.0f} kernels/s, {cpu_us / downloads:.0f} us of replica CPU per kernel")
        for replica in replicas:
            cleanup.stop(replica.process)
    return figures


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", type=Path, default=Path(__file__).resolve().parents[2] / "build-bench",
                        help="build directory with opcache and opcache-serve")
    parser.add_argument("--machines", type=int, default=8, help="machines warm-starting at once")
    parser.add_argument("--kernels", type=int, default=48, help="kernels each machine pulls")
    parser.add_argument("--size", type=int, default=65536, help="bytes of each kernel's object")
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--work", type=Path, default=Path("/tmp/opcache-replica-bench"))
    args = parser.parse_args()
    if args.work.exists():
        subprocess.run(["rm", "-rf", str(args.work)], check=True)
    cleanup = Cleanup()
    try:
        figures = replica_figures(args.build.resolve(), args.work, cleanup, args.machines, args.kernels, args.size,
                                  args.passes)
    finally:
        cleanup.close()
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
