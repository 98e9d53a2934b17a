"""Downloads from the bucket: the CPU time `opcache serve` over s3:// storage (moto) spends per
download of a bundle when it answers the GET itself (200 with the bytes, read from the bucket)
and when it redirects it to the bucket (`--redirect-downloads`: 307 to a presigned URL, which
the client then GETs from the bucket), and per kernel of a batch fetch (POST /v1/entries/fetch,
which stays proxied), for each bundle size.

The server's CPU is read from /proc: the sum over its threads of /proc/<pid>/task/*/schedstat
(nanoseconds on a CPU) and utime + stime of /proc/<pid>/stat (clock ticks), before and after
N requests; the clients' and moto's CPU are not counted. Medians of --passes passes, each
method in turn within a pass.

Run on its own (needs moto_server in PATH and a build with opcache and opcache-serve):
  python3 bench/lib/redirect_bench.py --build build-h2 --sizes 65536,1048576 --downloads 200
"""
import argparse
import hashlib
import http.client
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import BenchError, Cleanup, clean_env, cpu_ns, free_port, log, run, wait_until  # noqa: E402
from peers import OpcacheServe, http_ok  # noqa: E402

TOKEN = "bench-redirect-token"
SCENARIO = "device=single,phase=train,toolchain=8.0.RC2,soc=Ascend910B1"


def server_cpu(pid: int):
    """(nanoseconds on a CPU summed over the process's threads, utime + stime in seconds)."""
    ns = cpu_ns([pid])
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])  # utime, stime: fields 14 and 15 of stat(5)
    return ns, ticks / os.sysconf("SC_CLK_TCK")


def start_moto(cleanup, logdir: Path):
    logdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    cleanup.start(["moto_server", "-H", "127.0.0.1", "-p", port], logdir / "moto.log")
    endpoint = f"http://127.0.0.1:{port}"
    wait_until(lambda: http_ok(endpoint + "/moto-api/"), 30, "moto_server")
    return endpoint


def put_kernels(opcache: Path, work: Path, size: int, count: int):
    """`count` kernels whose object is `size` random bytes, in a fresh cache; returns (cache, keys)."""
    cache = work / f"cache-{size}"
    keys = []
    descriptor = work / "descriptor.json"
    for index in range(count):
        kernel = work / f"k{size}-{index}.o"
        kernel.write_bytes(os.urandom(size))
        tensor = {"shape": [index + 1], "dtype": "float32", "format": "ND"}
        descriptor.write_text(json.dumps({"op_type": "BenchRedirect", "inputs": [tensor], "outputs": [tensor],
                                          "attrs": {"size": size}}))
        out = run([opcache, "--cache-dir", cache, "--no-remote", "--json", "put", "--desc", descriptor,
                   "--scenario", SCENARIO, "--build-ms", 1000, kernel], env=clean_env())
        keys.append(json.loads(out)["key"])
    return cache, keys


class Connection:
    """One kept-alive HTTP/1.1 connection to a base URL."""

    def __init__(self, base: str):
        parts = urllib.parse.urlsplit(base)
        self.conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)

    def request(self, method, target, body=None, headers=None):
        self.conn.request(method, target, body=body, headers=headers or {})
        response = self.conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()


def proxied_gets(server: Connection, keys, downloads, sizes):
    for i in range(downloads):
        key = keys[i % len(keys)]
        status, _, body = server.request("GET", f"/v1/entries/{key}")
        if status != 200 or len(body) != sizes[key]:
            raise BenchError(f"GET /v1/entries/{key}: HTTP {status}, {len(body)} bytes")


def redirected_gets(server: Connection, bucket: Connection, keys, downloads, sizes):
    for i in range(downloads):
        key = keys[i % len(keys)]
        status, headers, _ = server.request("GET", f"/v1/entries/{key}", headers={"X-Opcache-Redirect": "1"})
        if status != 307:
            raise BenchError(f"GET /v1/entries/{key} (X-Opcache-Redirect: 1): HTTP {status}, not 307 "
                             "(is --redirect-downloads on?)")
        location = urllib.parse.urlsplit(headers["Location"])
        status, _, body = bucket.request("GET", f"{location.path}?{location.query}")
        if status != 200 or len(body) != sizes[key] or f'"{hashlib.sha256(body).hexdigest()}"' != headers["ETag"]:
            raise BenchError(f"the bucket's answer for {key}: HTTP {status}, {len(body)} bytes")


def stream_frames(body: bytes):
    """The frame headers of a bundle stream (docs/protocol.md "Batch fetch"), bodies skipped."""
    if body[:8] != b"OPCSTRM1":
        raise BenchError("POST /v1/entries/fetch: not a bundle stream")
    at, frames = 8, []
    while at < len(body):
        length = int.from_bytes(body[at:at + 4], "big")
        header = json.loads(body[at + 4:at + 4 + length])
        at += 4 + length + (header.get("bytes", 0) if header["status"] == "hit" else 0)
        frames.append(header)
    return frames


def batch_fetches(server: Connection, keys, downloads):
    """POST /v1/entries/fetch of `keys` (the `later` ones asked again) until `downloads` bundles came."""
    sent, pending = 0, list(keys)
    while sent < downloads:
        status, _, body = server.request("POST", "/v1/entries/fetch", body=json.dumps({"keys": pending}),
                                         headers={"Content-Type": "application/json"})
        frames = stream_frames(body) if status == 200 else []
        hits = sum(1 for f in frames if f["status"] == "hit")
        if hits == 0 or not frames or frames[-1]["status"] != "end":
            raise BenchError(f"POST /v1/entries/fetch: HTTP {status}, {len(body)} bytes, {hits} bundles")
        sent += hits
        pending = [f["key"] for f in frames if f["status"] == "later"] or list(keys)
    return sent


def measure(pid, action):
    """(server CPU microseconds from schedstat, from utime+stime, wall seconds) of `action`, which returns the count."""
    ns0, s0 = server_cpu(pid)
    started = time.perf_counter()
    count = action()
    wall = time.perf_counter() - started
    ns1, s1 = server_cpu(pid)
    return (ns1 - ns0) / 1000 / count, (s1 - s0) * 1e6 / count, wall / count


def redirect_figures(build: Path, work: Path, cleanup, sizes=(65536, 1 << 20), downloads=200, kernels=16, passes=3):
    work.mkdir(parents=True, exist_ok=True)
    os.environ.update(AWS_ACCESS_KEY_ID="AKIDBENCH", AWS_SECRET_ACCESS_KEY="bench/secret")
    os.environ.pop("AWS_SESSION_TOKEN", None)
    os.environ.pop("AWS_PROFILE", None)
    moto = start_moto(cleanup, work / "moto")
    tokens = work / "tokens"
    tokens.write_text(hashlib.sha256(TOKEN.encode()).hexdigest() + " bench read,write\n")
    server = OpcacheServe(cleanup, build / "opcache", f"s3://opcache-bench/redirect?endpoint={moto}", work / "serve",
                          2, extra=["--tokens", tokens, "--redirect-downloads"])
    figures = {"downloads": downloads, "kernels": kernels, "passes": passes, "sizes": {}}
    for size in sizes:
        cache, keys = put_kernels(build / "opcache", work, size, kernels)
        run([build / "opcache", "--cache-dir", cache, "--remote", server.url, "push"],
            env=clean_env(OPCACHE_TOKEN=TOKEN), what="opcache push")
        listing = json.loads(run([build / "opcache", "--cache-dir", cache, "--no-remote", "--json", "ls"],
                                 env=clean_env()))
        entries = listing["entries"] if isinstance(listing, dict) else listing
        bundle_bytes = {e["key"]: e["bundle_bytes"] for e in entries}
        serve_conn, bucket_conn = Connection(server.url), Connection(moto)
        methods = {
            "proxied_get": lambda: (proxied_gets(serve_conn, keys, downloads, bundle_bytes), downloads)[1],
            "redirected_get": lambda: (redirected_gets(serve_conn, bucket_conn, keys, downloads, bundle_bytes),
                                       downloads)[1],
            "batch_fetch": lambda: batch_fetches(serve_conn, keys, downloads),
        }
        samples = {name: [] for name in methods}
        for method in methods.values():  # warm-up: connections, moto's first requests
            method()
        for _ in range(passes):
            for name, method in methods.items():
                samples[name].append(measure(server.process.pid, method))
        row = {"bundle_bytes": statistics.median(bundle_bytes.values())}
        for name, values in samples.items():
            row[name] = {"server_cpu_us": round(statistics.median(v[0] for v in values), 1),
                         "server_cpu_us_ticks": round(statistics.median(v[1] for v in values), 1),
                         "wall_ms": round(statistics.median(v[2] for v in values) * 1000, 2)}
        figures["sizes"][str(size)] = row
        log(f"redirect: {size} B: " + ", ".join(f"{n} {row[n]['server_cpu_us']} us" for n in methods))
    cleanup.stop(server.process)
    return figures


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", type=Path, default=Path(__file__).resolve().parents[2] / "build-bench",
                        help="build directory with opcache and opcache-serve")
    parser.add_argument("--sizes", default="65536,1048576", help="object sizes in bytes, comma-separated")
    parser.add_argument("--downloads", type=int, default=200, help="downloads per measurement")
    parser.add_argument("--kernels", type=int, default=16, help="distinct kernels per size (and per batch)")
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--work", type=Path, default=Path("/tmp/opcache-redirect-bench"))
    args = parser.parse_args()
    if args.work.exists():
        subprocess.run(["rm", "-rf", str(args.work)], check=True)
    cleanup = Cleanup()
    try:
        figures = redirect_figures(args.build.resolve(), args.work, cleanup,
                                   [int(s) for s in args.sizes.split(",")], args.downloads, args.kernels, args.passes)
    finally:
        cleanup.close()
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
