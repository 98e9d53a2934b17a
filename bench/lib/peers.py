"""The servers and tools bench/run measures against, started on 127.0.0.1 at
run-time ports: nginx (static files, optionally WebDAV for ccache's HTTP
remote), `opcache serve`, the delay proxy that puts a round-trip time in front
of either (delay_proxy.py), ccache with a private directory and configuration,
and wrk. Every server is registered with harness.Cleanup and stopped on exit.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import urllib.parse
import urllib.request
from pathlib import Path

from harness import BenchError, clean_env, free_port, log, rss_kib, run, wait_until

LIB = Path(__file__).resolve().parent

# Tools each scenario needs; scripts/install-deps.sh --bench installs the Debian ones.
TOOLS = {"nginx": "nginx-light", "wrk": "wrk", "ccache": "ccache", "curl": "curl",
         "gcc": "gcc", "gnuplot": "gnuplot-nox", "cmake": "cmake"}


def missing_tools(names):
    """The tools of `names` not on PATH, each with the Debian package that has it."""
    return [f"{n} (Debian package {TOOLS.get(n, n)})" for n in names if shutil.which(n) is None]


def http_ok(url):
    try:
        with urllib.request.urlopen(url, timeout=1) as answer:
            return 200 <= answer.status < 500
    except urllib.error.HTTPError as error:
        return error.code < 500
    except OSError:
        return False


class Nginx:
    """nginx in the foreground with its own configuration under `prefix`, serving `root`
    (sendfile, keep-alive, one worker per CPU); with dav=True also PUT and DELETE, as
    ccache's HTTP remote storage needs. With access_log=True, request lines go to
    <prefix>/logs/access.log buffered as a busy site runs it (`buffer=64k flush=1s`: a crash
    loses at most a second of lines, the promise `opcache serve --access-log-flush 1000` makes);
    else `access_log off`."""

    def __init__(self, cleanup, prefix: Path, root: Path, dav=False, access_log=False):
        if dav and "--with-http_dav_module" not in subprocess.run(
                ["nginx", "-V"], stderr=subprocess.PIPE, text=True).stderr:
            raise BenchError("this nginx lacks the WebDAV module ccache's HTTP storage needs (nginx-light has it)")
        (prefix / "logs").mkdir(parents=True, exist_ok=True)
        (prefix / "tmp").mkdir(exist_ok=True)
        self.port = free_port()
        user = "user root root;" if os.getuid() == 0 else ""
        dav_lines = ("dav_methods PUT DELETE; create_full_put_path on; dav_access user:rw group:r all:r; "
                     "client_max_body_size 512m;") if dav else ""
        temp = " ".join(f"{k}_temp_path {prefix}/tmp/{k};" for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
        self.access_log = prefix / "logs" / "access.log" if access_log else None
        log_line = f"access_log {self.access_log} combined buffer=64k flush=1s;" if access_log else "access_log off;"
        conf = prefix / "nginx.conf"
        conf.write_text(f"""{user}
worker_processes {os.cpu_count()};
pid {prefix}/nginx.pid;
error_log {prefix}/logs/error.log warn;
events {{ worker_connections 8192; }}
http {{
  {log_line}
  {temp}
  default_type application/octet-stream;
  sendfile on; tcp_nopush on; tcp_nodelay on;
  keepalive_requests 1000000; keepalive_timeout 60s;
  open_file_cache max=20000 inactive=60s;
  server {{
    listen 127.0.0.1:{self.port} reuseport;
    root {root};
    location / {{ {dav_lines} }}
  }}
}}
""")
        self.process = cleanup.start(["nginx", "-p", prefix, "-e", prefix / "logs/error.log", "-c", conf,
                                      "-g", "daemon off;"], prefix / "logs/stdout.log")
        self.url = f"http://127.0.0.1:{self.port}"
        wait_until(lambda: self.process.poll() is not None or http_ok(self.url + "/"), 20, "nginx to answer")
        if self.process.poll() is not None:
            raise BenchError(f"nginx exited: {(prefix / 'logs/error.log').read_text()[-500:]}")

    def pids(self):
        """The master and its workers."""
        children = subprocess.run(["pgrep", "-P", str(self.process.pid)], stdout=subprocess.PIPE,
                                  text=True).stdout.split()
        return [self.process.pid, *map(int, children)]

    def rss_kib(self):
        """RSS of the master and its workers together."""
        return sum(rss_kib(p) for p in self.pids())


def start_on_port_file(cleanup, command, port_file: Path, log_path: Path, what, env=None):
    """Starts `command` (which writes "host:port" to `port_file` once it listens) with its output
    in `log_path`, and waits for the port. Returns (process, port); BenchError naming `what`
    with the log's tail when it exits first."""
    port_file.unlink(missing_ok=True)
    process = cleanup.start(command, log_path, env=env)
    wait_until(lambda: process.poll() is not None or (port_file.exists() and port_file.read_text().strip()),
               20, f"{what} to write its port file")
    if process.poll() is not None:
        raise BenchError(f"{what} exited: {log_path.read_text()[-800:]}")
    return process, int(port_file.read_text().split()[0].rsplit(":", 1)[1])


class OpcacheServe:
    """`opcache serve` on a local store, anonymous reads, a free port (read from --port-file).
    With access_log=True, request lines go to <logdir>/access.log with the server's default
    batching (as a team runs it: written together every --access-log-flush, 1 s); else
    `--access-log off`."""

    def __init__(self, cleanup, opcache: Path, store: Path, logdir: Path, threads, extra=(), access_log=False):
        logdir.mkdir(parents=True, exist_ok=True)
        port_file = logdir / "port"
        self.access_log = logdir / "access.log" if access_log else None
        self.process, self.port = start_on_port_file(
            cleanup, [opcache, "serve", "--storage", store, "--listen", "127.0.0.1:0", "--port-file", port_file,
                      "--threads", threads, "--anonymous-read", "--access-log", self.access_log or "off", *extra],
            port_file, logdir / "server.log", "opcache serve", env=clean_env())
        self.url = f"http://127.0.0.1:{self.port}"
        wait_until(lambda: http_ok(self.url + "/healthz"), 20, "opcache serve /healthz")

    def pids(self):
        return [self.process.pid]

    def rss_kib(self, field="VmRSS"):
        return rss_kib(self.process.pid, field)


class HttpFloor:
    """bench_http_floor (bench/http_floor.cpp) serving `root` on a free port (read from
    --port-file) with `threads` I/O threads: opcache serve's framework, used as opcache serve
    uses it, answering from memory and doing nothing else per request. The server scenario's
    floor: what any server built this way can reach on this machine."""

    def __init__(self, cleanup, binary: Path, root: Path, logdir: Path, threads):
        logdir.mkdir(parents=True, exist_ok=True)
        port_file = logdir / "port"
        self.process, self.port = start_on_port_file(
            cleanup, [binary, "--root", root, "--threads", threads, "--port-file", port_file], port_file,
            logdir / "server.log", "bench_http_floor", env=clean_env())
        self.url = f"http://127.0.0.1:{self.port}"

    def pids(self):
        return [self.process.pid]


class DelayProxy:
    """delay_proxy.py in its own process on 127.0.0.1 at a free port (read from --port-file) in
    front of `upstream` (a URL or host:port): every byte each way delayed by rtt_ms / 2, the TCP
    handshake's round trip emulated on new connections. Logs to <logdir>/proxy.log; stop()
    returns the totals it logged when it stopped (connections, bytes each way)."""

    def __init__(self, cleanup, upstream, rtt_ms, logdir: Path, handshake=True):
        logdir.mkdir(parents=True, exist_ok=True)
        target = urllib.parse.urlsplit(upstream if "//" in upstream else f"//{upstream}")
        self.cleanup, self.rtt_ms = cleanup, rtt_ms
        self.upstream = f"{target.hostname}:{target.port}"
        self.log_path = logdir / "proxy.log"
        port_file = logdir / "port"
        self.process, self.port = start_on_port_file(
            cleanup, [sys.executable, LIB / "delay_proxy.py", "--upstream", self.upstream, "--rtt-ms", rtt_ms,
                      "--port-file", port_file, "--log", self.log_path, *([] if handshake else ["--no-handshake"])],
            port_file, logdir / "stdout.log", "the delay proxy")
        self.url = f"http://127.0.0.1:{self.port}"

    def stop(self):
        """Stops the proxy; returns its summary line's totals ({} when it logged none)."""
        self.cleanup.stop(self.process)
        lines = [line for line in self.log_path.read_text().splitlines() if " summary {" in line]
        return json.loads(lines[-1].split(" summary ", 1)[1]) if lines else {}


class Ccache:
    """ccache with a private cache directory and configuration file (direct mode, optional
    HTTP remote storage); nothing of the caller's ccache setup leaks in."""

    def __init__(self, directory: Path, remote=None):
        self.dir = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.conf = directory / "ccache.conf"
        lines = ["direct_mode = true", "max_size = 20G", "compression = true", "stats = true"]
        if remote:
            lines.append(f"remote_storage = {remote}")
        self.conf.write_text("\n".join(lines) + "\n")
        self.env = clean_env(CCACHE_DIR=directory, CCACHE_CONFIGPATH=self.conf)

    def reset_local(self):
        """Empties the local cache (files and statistics), keeping the configuration."""
        for child in self.dir.iterdir():
            if child != self.conf:
                shutil.rmtree(child) if child.is_dir() else child.unlink()

    def stats(self):
        """ccache's counters as a dict (from --print-stats)."""
        out = run(["ccache", "--print-stats"], env=self.env)
        return {k: int(v) for k, v in (line.split("\t") for line in out.splitlines() if "\t" in line)
                if v.isdigit()}


def ccache_version():
    return run(["ccache", "--version"]).splitlines()[0]


def wrk(url, paths_file: Path, connections, seconds, threads):
    """One wrk run GETting every path of `paths_file` in turn; returns the figures
    (requests/s, latency percentiles in µs, non-2xx answers, socket errors)."""
    out = run(["wrk", "-t", threads, "-c", connections, "-d", f"{seconds}s", "--timeout", "10s",
               "-s", LIB / "rotate_paths.lua", url, "--", paths_file], what=f"wrk -c {connections} {url}")
    found = re.search(r"^WRK_JSON (.*)$", out, re.M)
    if not found:
        raise BenchError(f"wrk printed no figures:\n{out[-500:]}")
    figures = json.loads(found.group(1))
    figures["requests_per_second"] = figures["requests"] / (figures["duration_us"] / 1e6)
    figures["non_2xx"] = figures["errors"]["status"]
    figures["socket_errors"] = sum(figures["errors"][k] for k in ("connect", "read", "write", "timeout"))
    return figures


def log_missing(names):
    missing = missing_tools(names)
    for m in missing:
        log(f"missing: {m} (scripts/install-deps.sh --bench)")
    return missing
