"""Scenarios against the team server (bench/run): `opcache pull` of N bundles vs
`curl --parallel` fetching the same bytes from nginx; wrk GETs of small, large
and 1 MB bundles at 64 and 512 connections, opcache serve vs nginx serving the
same bytes, each pair with request logs off and on; and a memory soak of
opcache serve under wrk at 512 connections.
"""
import hashlib
import json
import os
import random
import shutil
import subprocess
import time
from pathlib import Path

from harness import BenchError, cpu_ns, log, median, ratio, run, timed
from peers import LIB, wrk


def export_www(opcache, store: Path, www: Path):
    """Links each entry's bundle object to www/v1/entries/<key>, the path opcache serve answers,
    so nginx sends the same bytes. Returns {key: bundle bytes}."""
    listing = json.loads(run(opcache.cmd(store, "--json", "ls"), env=opcache.env))
    entries = www / "v1" / "entries"
    entries.mkdir(parents=True, exist_ok=True)
    sizes = {}
    for e in listing["entries"]:
        obj = store / "objects" / e["digest"][:2] / e["digest"]
        target = entries / e["key"]
        if not target.exists():
            try:
                os.link(obj, target)
            except OSError:
                shutil.copyfile(obj, target)
        sizes[e["key"]] = e["bundle_bytes"]
    return sizes


MEGABYTE_BUNDLES = 8


def add_megabyte_bundles(opcache, store: Path, work: Path, count=MEGABYTE_BUNDLES, size=1 << 20):
    """Puts `count` bundles of one incompressible `size`-byte member each into `store` (the same
    bytes every run, so the keys are too); returns their keys. Kernels of the corpora are far
    smaller: these stand for a large fused kernel, where the body's copy dominates the request."""
    (work / "mb").mkdir(parents=True, exist_ok=True)
    keys = []
    for i in range(count):
        desc = work / "mb" / f"mb_{i}.json"
        desc.write_text(json.dumps({"attrs": {}, "full_name": f"Default/network/Fused-op{i}", "inputs": [],
                                    "kernel_name": f"mb_{i:05d}__kernel0", "op_type": "Fused", "outputs": []}))
        member = work / "mb" / f"mb_{i}.o"
        member.write_bytes(random.Random(i).randbytes(size))
        answer = json.loads(run(opcache.cmd(store, "--json", "put", "--desc", desc, "--scenario",
                                            "device=single,phase=train,toolchain=bench,soc=x86_64", member),
                                env=opcache.env))
        keys.append(answer["key"])
    return keys


def same_bytes(serve_url, nginx_url, key, work: Path):
    """Raises BenchError unless both servers answer GET /v1/entries/<key> with the same bytes."""
    bodies = []
    for url in (serve_url, nginx_url):
        out = work / "probe"
        run(["curl", "-sf", "-o", out, f"{url}/v1/entries/{key}"], what=f"curl {url}/v1/entries/{key}")
        bodies.append(out.read_bytes())
    if bodies[0] != bodies[1]:
        raise BenchError(f"opcache serve and nginx answer different bytes for {key}")


def write_store_layout(root, sizes):
    """Writes one file of each size the way a store lays out pulled bundles (docs/formats.md),
    and nothing else: per bundle a temp file linked into objects/<2 hex>/ and its temp name
    removed, a key record (≈ 0.5 KB) renamed into keys/<2 hex>/, shard directories made as
    needed. No network, no verification, no index: the file-system work alone of a pull."""
    for sub in ("objects", "keys", "tmp"):
        (root / sub).mkdir(parents=True)
    record = b"k" * 480
    payload = memoryview(b"b" * max(sizes, default=0))  # made once: only the writes are the floor's work
    for i, size in enumerate(sizes):
        digest = hashlib.sha256(b"object %d" % i).hexdigest()
        key = hashlib.sha256(b"key %d" % i).hexdigest()
        temp = root / "tmp" / f"{i}.tmp"
        temp.write_bytes(payload[:size])
        (root / "objects" / digest[:2]).mkdir(exist_ok=True)
        os.link(temp, root / "objects" / digest[:2] / digest)
        temp.unlink()
        (root / "keys" / key[:2]).mkdir(exist_ok=True)
        record_temp = root / "tmp" / f"{i}.key"
        record_temp.write_bytes(record)
        os.rename(record_temp, root / "keys" / key[:2] / key)


def pull_vs_curl(ctx, sets, passes, serve_url, nginx_url, parallel=8, subdir="pull", layout_floor=False):
    """For each named key set: `opcache pull -j P` into an empty store vs `curl --parallel` of the
    same bundles from nginx into files; interleaved passes, medians. The URLs may be delay proxies
    in front of the servers (the latency scenario); `subdir` is the work subdirectory. With
    `layout_floor`, also the file-system work alone of storing the same bundles in a store's
    layout (write_store_layout): the least any pull into that layout costs on this machine."""
    work = ctx.work / subdir
    results = {}
    for name, keys in sets.items():
        (work / name).mkdir(parents=True, exist_ok=True)
        keys_file = work / name / "keys.txt"
        keys_file.write_text("".join(k + "\n" for k in keys))
        out = work / name / "curl-out"
        cfg = work / name / "curl.cfg"
        cfg.write_text("".join(f'url = "{nginx_url}/v1/entries/{k}"\noutput = "{out}/{k}"\n' for k in keys))
        total = sum(ctx.bundle_bytes[k] for k in keys)
        walls = {"opcache_pull": [], "curl_parallel_nginx": []}
        if layout_floor:
            walls["layout_floor"] = []

        def run_pull():
            store = work / name / "store"
            shutil.rmtree(store, ignore_errors=True)
            start = time.perf_counter()
            report = json.loads(run(ctx.opcache.cmd(store, "--json", "pull", "-j", parallel, "--keys", keys_file,
                                                    remote=serve_url), env=ctx.opcache.env))
            wall = time.perf_counter() - start
            if report.get("transferred") != len(keys) or report.get("failed"):
                raise BenchError(f"opcache pull of {len(keys)} {name} bundles: {report}")
            return wall

        def run_curl():
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir()
            wall = timed(["curl", "--parallel", "--parallel-immediate", "--parallel-max", parallel, "--fail",
                          "--silent", "--show-error", "-K", cfg])
            files = list(out.iterdir())
            got = sum(f.stat().st_size for f in files)
            if len(files) != len(keys) or got != total:
                raise BenchError(f"curl fetched {len(files)} files, {got} bytes; expected {len(keys)}, {total}")
            return wall

        def run_layout_floor():
            root = work / name / "layout-floor"
            shutil.rmtree(root, ignore_errors=True)
            start = time.perf_counter()
            write_store_layout(root, [ctx.bundle_bytes[k] for k in keys])
            return time.perf_counter() - start

        for p in range(passes):
            order = [("opcache_pull", run_pull), ("curl_parallel_nginx", run_curl)]
            order += [("layout_floor", run_layout_floor)] if layout_floor else []
            for label, fn in (order if p % 2 == 0 else order[::-1]):
                walls[label].append(fn())
        med = {k: median(v) for k, v in walls.items()}
        results[name] = {"bundles": len(keys), "bytes": total, "parallel": parallel, "passes": passes,
                         "seconds": med, "all_seconds": walls,
                         "ratio": ratio(med["opcache_pull"], med["curl_parallel_nginx"])}
        log(f"pull {name}: opcache {med['opcache_pull']:.3f} s, curl {med['curl_parallel_nginx']:.3f} s "
            f"({len(keys)} bundles, {total / 1e6:.1f} MB)")
    return results


def wrk_matrix(ctx, sets, servers, connections, seconds, passes, warmup, tag="log off"):
    """wrk GETs of each key set at each connection count, servers in turn (the order reversed every
    other pass); per cell the median pass by requests/s. `servers` maps opcache_serve and nginx,
    and optionally http_floor (bench_http_floor: the cell then has its figures and their ratios to
    nginx's), to the running server (its `url` and `pids()`): each run also gives the server's CPU
    time per request (`server_cpu_us_per_request`, all its processes and threads), which on a
    machine whose cores wrk shares says how much of the throughput the server's own work allows.
    `tag` names the pair in the progress lines (request logs off or on)."""
    work = ctx.work / "wrk"
    work.mkdir(parents=True, exist_ok=True)
    threads = os.cpu_count()
    paths = {}
    for name, keys in sets.items():
        paths[name] = work / f"{name}.paths"
        paths[name].write_text("".join(f"/v1/entries/{k}\n" for k in keys))
    for name, server in servers.items():
        log(f"wrk warm-up: {name}, {warmup} s")
        wrk(server.url, paths["small"], 64, warmup, threads)
    cells = []
    for name in sets:
        for c in connections:
            runs = {s: [] for s in servers}
            for p in range(passes):
                order = list(servers) if p % 2 == 0 else list(servers)[::-1]
                for server in order:
                    pids = servers[server].pids()
                    before = cpu_ns(pids)
                    figures = wrk(servers[server].url, paths[name], c, seconds, threads)
                    figures["server_cpu_us_per_request"] = round((cpu_ns(pids) - before) / 1e3 /
                                                                 max(figures["requests"], 1), 2)
                    runs[server].append(figures)
                    log(f"wrk {tag} {name} c={c} {server}: {figures['requests_per_second']:.0f} req/s, "
                        f"{figures['server_cpu_us_per_request']} µs of server CPU per request, "
                        f"p50 {figures['latency_us']['p50']} µs, p99 {figures['latency_us']['p99']} µs, "
                        f"non-2xx {figures['non_2xx']}, socket errors {figures['socket_errors']}")
            pick = {s: sorted(v, key=lambda f: f["requests_per_second"])[(len(v) - 1) // 2] for s, v in runs.items()}
            o, n = pick["opcache_serve"], pick["nginx"]
            cell = {"bundles": name, "connections": c, "opcache_serve": o, "nginx": n,
                    "non_2xx_all_passes": {s: sum(f["non_2xx"] for f in v) for s, v in runs.items()},
                    "ratio_rps": ratio(o["requests_per_second"], n["requests_per_second"]),
                    "ratio_p50": ratio(o["latency_us"]["p50"], n["latency_us"]["p50"]),
                    "ratio_p99": ratio(o["latency_us"]["p99"], n["latency_us"]["p99"])}
            if "http_floor" in pick:
                f = pick["http_floor"]
                cell.update({"http_floor": f,
                             "floor_ratio_rps": ratio(f["requests_per_second"], n["requests_per_second"]),
                             "floor_ratio_p99": ratio(f["latency_us"]["p99"], n["latency_us"]["p99"])})
            cells.append(cell)
    return {"seconds_per_run": seconds, "passes": passes, "wrk_threads": threads, "cells": cells}


def log_pair_summary(tag, matrix):
    """One progress line per cell: opcache serve's requests/s and p99 against nginx's."""
    for c in matrix["cells"]:
        o, n = c["opcache_serve"], c["nginx"]
        x = lambda v: f"{v:.2f}x" if v is not None else "-"
        floor = (f"; floor {c['http_floor']['requests_per_second']:.0f} req/s ({x(c['floor_ratio_rps'])} nginx)"
                 if "http_floor" in c else "")
        log(f"server ({tag}) {c['bundles']} c={c['connections']}: {o['requests_per_second']:.0f} vs "
            f"{n['requests_per_second']:.0f} req/s ({x(c['ratio_rps'])} nginx), p99 {o['latency_us']['p99']} vs "
            f"{n['latency_us']['p99']} µs ({x(c['ratio_p99'])}), server CPU per request "
            f"{o.get('server_cpu_us_per_request')} vs {n.get('server_cpu_us_per_request')} µs{floor}")


def soak(ctx, serve, paths_keys, seconds, connections=512, every=10):
    """wrk at `connections` against opcache serve for `seconds`, RSS sampled every `every` s."""
    paths = ctx.work / "wrk" / "soak.paths"
    paths.write_text("".join(f"/v1/entries/{k}\n" for k in paths_keys))
    log(f"memory soak: wrk -c {connections} for {seconds} s against opcache serve, RSS every {every} s")
    samples = [(0.0, serve.rss_kib())]
    command = ["wrk", "-t", os.cpu_count(), "-c", connections, "-d", f"{seconds}s", "--timeout", "10s",
               "-s", LIB / "rotate_paths.lua", serve.url, "--", paths]
    start = time.monotonic()
    process = subprocess.Popen([str(c) for c in command], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    while process.poll() is None:
        try:
            process.wait(timeout=every)
        except subprocess.TimeoutExpired:
            pass
        samples.append((round(time.monotonic() - start, 1), serve.rss_kib()))
    out = process.stdout.read()
    if process.returncode != 0 or "WRK_JSON" not in out:
        raise BenchError(f"wrk (soak) exited {process.returncode}: {out[-400:]}")
    figures = json.loads(out.split("WRK_JSON ", 1)[1].splitlines()[0])
    return {"seconds": seconds, "connections": connections, "rss_kib_samples": samples,
            "rss_kib_start": samples[0][1], "rss_kib_end": samples[-1][1], "peak_rss_kib": serve.rss_kib("VmHWM"),
            "requests": figures["requests"], "non_2xx": figures["errors"]["status"],
            "requests_per_second": figures["requests"] / (figures["duration_us"] / 1e6)}
