#!/usr/bin/env python3
"""A TCP proxy on 127.0.0.1 in front of one upstream host:port that delays each
direction by a fixed one-way delay (RTT / 2): the `latency` scenario of bench/run
puts one in front of each server to measure the team cache a network away.
Standard library only (asyncio); no netem, no root.

What it does to every connection:

* each chunk read from one side is written to the other no earlier than the
  time it was read plus the one-way delay. Chunks are queued with their due
  time and written when it comes while reading goes on (pipelined): the delay
  adds latency, not a limit on throughput. Byte order is kept per direction.
* the TCP handshake's round trip is emulated (unless --no-handshake): the
  kernel completes the client's connect at once, so the proxy holds the
  client's first bytes until one RTT after the accept, as a client could send
  them only once the SYN-ACK came back. A fresh connection's first request
  therefore costs two RTTs to its first byte, a kept-alive one one RTT.
* half-close and close propagate, delayed like data: end of stream from one
  side becomes shutdown(SHUT_WR) of the other; a reset or read error closes
  both sides.

    delay_proxy.py --upstream 127.0.0.1:8080 --rtt-ms 50 [--listen 127.0.0.1:0]
                   [--port-file F] [--log F] [--no-handshake] [--buffer-mib 64]
    delay_proxy.py --self-test [--rtt-ms 50]

The port it listens on is written to --port-file ("127.0.0.1:PORT") once it
listens. Every connection is logged (bytes each way, how it ended) to --log
(default stderr); SIGTERM or SIGINT stops it, after a last line
"summary {json}" with the totals.
"""
import argparse
import asyncio
import json
import logging
import os
import signal
import socket
import sys
import time
from pathlib import Path

CHUNK = 256 * 1024
EOF = "eof"      # the source ended its stream (FIN): half-close the destination
RESET = "reset"  # the source failed (reset, error): close both sides


class Budget:
    """Bytes in flight in one direction (read, not yet written): reading waits while it is over
    the limit, so a fast sender cannot fill the proxy's memory. The limit is far above any
    bandwidth-delay product of the benchmark (64 MiB = 2.5 GB/s at 25 ms one way)."""

    def __init__(self, limit):
        self.limit, self.used = limit, 0
        self.room = asyncio.Event()
        self.room.set()

    def take(self, n):
        self.used += n
        if self.used >= self.limit:
            self.room.clear()

    def give(self, n):
        self.used -= n
        if self.used < self.limit:
            self.room.set()


class DelayProxy:
    def __init__(self, upstream_host, upstream_port, rtt_seconds, handshake=True, buffer_bytes=64 << 20,
                 log=None):
        self.upstream = (upstream_host, upstream_port)
        self.rtt = rtt_seconds
        self.delay = rtt_seconds / 2
        self.handshake = handshake
        self.buffer = buffer_bytes
        self.log = log or logging.getLogger("delay_proxy")
        self.server = None
        self.port = None
        self.tasks = set()
        self.totals = {"connections": 0, "active": 0, "max_active": 0, "bytes_up": 0, "bytes_down": 0,
                       "upstream_refused": 0, "resets": 0}
        self._ids = 0

    async def start(self, host="127.0.0.1", port=0):
        self.server = await asyncio.start_server(self._accepted, host, port, backlog=4096, limit=CHUNK)
        self.port = self.server.sockets[0].getsockname()[1]
        self.log.info("listening on %s:%d, upstream %s:%d, RTT %.1f ms (one way %.1f ms), handshake %s",
                      host, self.port, *self.upstream, self.rtt * 1e3, self.delay * 1e3,
                      "emulated" if self.handshake else "not emulated")
        return self.port

    async def stop(self):
        if self.server:
            self.server.close()
        for task in list(self.tasks):
            task.cancel()
        if self.tasks:
            await asyncio.gather(*self.tasks, return_exceptions=True)
        self.log.info("summary %s", json.dumps(self.totals, sort_keys=True))

    async def _accepted(self, client_reader, client_writer):
        task = asyncio.current_task()
        self.tasks.add(task)
        try:
            await self._connection(client_reader, client_writer)
        except asyncio.CancelledError:
            pass  # stopping: end quietly (Python 3.11's start_server callback logs a cancelled task)
        finally:
            self.tasks.discard(task)

    async def _connection(self, client_reader, client_writer):
        loop = asyncio.get_running_loop()
        accepted = loop.time()
        self._ids += 1
        cid = self._ids
        t = self.totals
        t["connections"] += 1
        t["active"] += 1
        t["max_active"] = max(t["max_active"], t["active"])
        peer = client_writer.get_extra_info("peername")
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(*self.upstream, limit=CHUNK)
        except OSError as error:
            t["upstream_refused"] += 1
            t["active"] -= 1
            self.log.warning("conn %d from %s: upstream %s:%d refused (%s); closing", cid, peer, *self.upstream,
                             error)
            # A refused connect fails when the RST is back, one RTT after the SYN left.
            try:
                await asyncio.sleep(self.rtt if self.handshake else self.delay)
            finally:
                client_writer.close()
            return
        for writer in (client_writer, upstream_writer):
            sock = writer.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        # The server sees the connection one way after the SYN left; the client may send only
        # once the SYN-ACK is back, one RTT after it connected.
        up_from = accepted + (self.rtt if self.handshake else 0)
        down_from = accepted + (self.delay if self.handshake else 0)
        counts = {"up": 0, "down": 0}
        up = asyncio.create_task(self._direction(client_reader, upstream_writer, up_from, counts, "up"))
        down = asyncio.create_task(self._direction(upstream_reader, client_writer, down_from, counts, "down"))
        ends = {}
        try:
            pending = {up, down}
            while pending:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    ends[task] = task.result()
                    if ends[task] != EOF:
                        # A reset, or the destination gone: nothing more can be carried either way.
                        for other in pending:
                            other.cancel()
                        await asyncio.gather(*pending, return_exceptions=True)
                        pending = set()
        except BaseException as error:  # stopping (cancelled), or a bug: neither direction may outlive it
            up.cancel()
            down.cancel()
            await asyncio.gather(up, down, return_exceptions=True)
            for task in (up, down):
                ends.setdefault(task, "cancelled" if isinstance(error, asyncio.CancelledError) else f"error {error!r}")
            raise
        finally:
            for writer in (client_writer, upstream_writer):
                writer.close()
            for writer in (client_writer, upstream_writer):
                try:
                    await writer.wait_closed()
                except (OSError, asyncio.CancelledError):
                    pass
            t["active"] -= 1
            t["bytes_up"] += counts["up"]
            t["bytes_down"] += counts["down"]
            how = f"up {ends.get(up, '?')}, down {ends.get(down, '?')}"
            if RESET in ends.values() or "write-failed" in ends.values():
                t["resets"] += 1
            self.log.info("conn %d from %s: %d B up, %d B down, %.1f ms, %s", cid, peer, counts["up"],
                          counts["down"], (loop.time() - accepted) * 1e3, how)

    async def _direction(self, reader, writer, not_before, counts, name):
        """Carries one direction: a reader task queues (due time, chunk) as fast as it reads; this
        task writes each chunk when its time comes. Returns how the direction ended."""
        loop = asyncio.get_running_loop()
        queue = asyncio.Queue()
        budget = Budget(self.buffer)

        async def read_side():
            while True:
                await budget.room.wait()
                try:
                    data = await reader.read(CHUNK)
                except (OSError, asyncio.IncompleteReadError):
                    queue.put_nowait((max(loop.time(), not_before) + self.delay, RESET))
                    return
                due = max(loop.time(), not_before) + self.delay
                if not data:
                    queue.put_nowait((due, EOF))
                    return
                budget.take(len(data))
                queue.put_nowait((due, data))

        reading = asyncio.create_task(read_side())
        try:
            while True:
                due, data = await queue.get()
                wait = due - loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                if data is RESET:
                    return RESET
                if data is EOF:
                    try:
                        if writer.can_write_eof():
                            writer.write_eof()
                    except OSError:
                        return "write-failed"
                    return EOF
                try:
                    writer.write(data)
                    budget.give(len(data))
                    counts[name] += len(data)
                    await writer.drain()
                except OSError:
                    return "write-failed"
        finally:
            reading.cancel()
            await asyncio.gather(reading, return_exceptions=True)


def host_port(text, default_host="127.0.0.1"):
    host, _, port = text.rpartition(":")
    return (host or default_host), int(port)


async def serve(args):
    logger = logging.getLogger("delay_proxy")
    host, port = host_port(args.upstream)
    proxy = DelayProxy(host, port, args.rtt_ms / 1e3, handshake=not args.no_handshake,
                       buffer_bytes=int(args.buffer_mib * (1 << 20)), log=logger)
    listen_host, listen_port = host_port(args.listen)
    bound = await proxy.start(listen_host, listen_port)
    if args.port_file:
        tmp = Path(f"{args.port_file}.tmp")
        tmp.write_text(f"{listen_host}:{bound}\n")
        os.replace(tmp, args.port_file)
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stopping.set)
    await stopping.wait()
    logger.info("stopping (signal)")
    await proxy.stop()


# ---------------------------------------------------------------------------------------------
# Self-test: python3 bench/lib/delay_proxy.py --self-test [--rtt-ms 50]


def _self_test(rtt_ms):
    import hashlib
    import http.client
    import shutil
    import socketserver
    import subprocess
    import tempfile
    import threading
    import urllib.request
    from concurrent.futures import ThreadPoolExecutor

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from harness import Cleanup, free_port, wait_until
    from peers import DelayProxy as Peer, http_ok

    rtt = rtt_ms / 1e3
    failures = []

    def check(ok, what):
        print(f"  {'ok  ' if ok else 'FAIL'} {what}")
        if not ok:
            failures.append(what)

    def get(url):
        start = time.perf_counter()
        with urllib.request.urlopen(url, timeout=30) as answer:
            body = answer.read()
        return body, time.perf_counter() - start

    def ttfb(port, path, requests=1):
        """Seconds to the status line of each of `requests` GETs on one kept-alive connection."""
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        figures = []
        for _ in range(requests):
            start = time.perf_counter()
            connection.request("GET", path)
            answer = connection.getresponse()
            figures.append(time.perf_counter() - start)
            answer.read()
        connection.close()
        return figures

    sent_at = []  # perf_counter() when the raw server sent each chunk of "stream"

    class Raw(socketserver.ThreadingMixIn, socketserver.TCPServer):
        """An upstream for what HTTP does not show: "stream" sends 100 chunks of 1 KiB 5 ms apart
        then closes; anything else is read to end of stream and answered with its size and SHA-256."""
        daemon_threads = True
        allow_reuse_address = True

    class RawHandler(socketserver.BaseRequestHandler):
        def handle(self):
            self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            first = self.request.recv(6)
            if first == b"stream":
                for i in range(100):
                    sent_at.append(time.perf_counter())
                    self.request.sendall(b"%04d" % i + b"x" * 1020)
                    time.sleep(0.005)
                return
            digest, size, data = hashlib.sha256(first), len(first), first
            while data:
                data = self.request.recv(65536)
                digest.update(data)
                size += len(data)
            self.request.sendall(f"{size} {digest.hexdigest()}\n".encode())

    def read_all(sock):
        parts = []
        while True:
            data = sock.recv(65536)
            if not data:
                return b"".join(parts)
            parts.append(data)

    work = Path(tempfile.mkdtemp(prefix="delay-proxy-test."))
    cleanup = Cleanup()
    raw = None
    try:
        blob = os.urandom(5 * 1024 * 1024)
        (work / "www").mkdir()
        (work / "www" / "blob.bin").write_bytes(blob)
        (work / "www" / "small.txt").write_bytes(b"hello\n" * 100)
        port = free_port()
        # python3 -m http.server, with a listen backlog of 128 instead of socketserver's 5: with 5,
        # 20 connections at once overflow its accept queue and the kernel drops SYNs, which are
        # sent again after 1 s (20 parallel requests straight to a plain `-m http.server` take
        # over 1 s on loopback, no proxy involved).
        server = cleanup.start([sys.executable, "-c", "import runpy, socketserver, sys; "
                                "socketserver.TCPServer.request_queue_size = 128; sys.argv[0] = 'http.server'; "
                                "runpy.run_module('http.server', run_name='__main__', alter_sys=True)",
                                "-b", "127.0.0.1", "-d", work / "www", "-p", "HTTP/1.1", port],
                               work / "http-server.log")
        direct = f"http://127.0.0.1:{port}"
        wait_until(lambda: server.poll() is not None or http_ok(direct + "/small.txt"), 20, "http.server")
        proxy = Peer(cleanup, direct, rtt_ms, work / "proxy")
        print(f"delay_proxy self-test: RTT {rtt_ms:g} ms; http.server on {direct}, proxy on {proxy.url}")

        direct_ttfb = min(ttfb(port, "/small.txt")[0] for _ in range(3))
        _, direct_seconds = get(direct + "/blob.bin")
        body, seconds = get(proxy.url + "/blob.bin")
        check(body == blob, f"(a) 5 MiB file through the proxy: {len(body):,} bytes, identical "
                            f"{body == blob}, {seconds * 1e3:.0f} ms (direct {direct_seconds * 1e3:.0f} ms)")
        fresh, again = ttfb(proxy.port, "/small.txt", 2)
        check(fresh >= rtt and again >= rtt,
              f"(b) time to first byte: {fresh * 1e3:.1f} ms on a fresh connection (handshake + request: "
              f"≈ 2 RTT = {2 * rtt_ms:g} ms), {again * 1e3:.1f} ms on the kept-alive one (≈ 1 RTT); "
              f"direct {direct_ttfb * 1e3:.2f} ms; both ≥ {rtt_ms:g} ms")
        # 20 requests at once, each on its own fresh connection (≥ 2 RTT each).
        def parallel(url):
            with ThreadPoolExecutor(20) as pool:
                start = time.perf_counter()
                answers = list(pool.map(lambda _: get(url + "/small.txt"), range(20)))
                return answers, time.perf_counter() - start
        _, direct_wall = parallel(direct)
        answers, wall = parallel(proxy.url)
        limit = direct_wall + 20 * rtt / 4
        check(all(b == b"hello\n" * 100 for b, _ in answers) and wall < limit,
              f"(c) 20 parallel requests: {wall * 1e3:.0f} ms in all (each "
              f"{min(s for _, s in answers) * 1e3:.0f}–{max(s for _, s in answers) * 1e3:.0f} ms; direct "
              f"{direct_wall * 1e3:.0f} ms in all); one after another would take ≥ {20 * 2 * rtt_ms:g} ms; "
              f"limit direct + 20 × RTT / 4 = {limit * 1e3:.0f} ms")

        raw_port = free_port()
        raw = Raw(("127.0.0.1", raw_port), RawHandler)
        threading.Thread(target=raw.serve_forever, daemon=True).start()
        raw_proxy = Peer(cleanup, f"127.0.0.1:{raw_port}", rtt_ms, work / "raw-proxy")
        # Each chunk must arrive one way after it was sent, however many are on their way: a proxy
        # that slept the delay per read would hold a chunk sent during its sleep until the sleep
        # ended (up to a further one-way delay, half of it on average).
        arrived_at, data = [], b""
        with socket.create_connection(("127.0.0.1", raw_proxy.port), timeout=30) as sock:
            start = time.perf_counter()
            sock.sendall(b"stream")
            while True:
                part = sock.recv(65536)
                now = time.perf_counter()
                if not part:
                    break
                data += part
                while len(arrived_at) < 100 and len(data) > 1024 * len(arrived_at):
                    arrived_at.append(now)
            wall = time.perf_counter() - start
        expected = b"".join(b"%04d" % i + b"x" * 1020 for i in range(100))
        extra = sorted((a - s - rtt / 2) * 1e3 for a, s in zip(arrived_at, sent_at))
        # The floors: the proxy's own cost (≈ 0.6 ms on loopback with no delay, Python both ends) and
        # the event loop's 1 ms timer granularity; only at RTTs well above them does (d) tell.
        p50_limit, p90_limit = max(rtt_ms / 8, 2.5), max(rtt_ms / 4, 5)
        check(data == expected and len(extra) == 100 and extra[49] < p50_limit and extra[89] < p90_limit,
              f"(d) pipelined: 100 chunks of 1 KiB sent 5 ms apart on one connection arrived in order, each "
              f"one way ({rtt_ms / 2:g} ms) after it was sent plus p50 {extra[49]:.1f} ms, p90 {extra[89]:.1f} ms, "
              f"max {extra[-1]:.1f} ms (limits p50 < {p50_limit:g} ms, p90 < {p90_limit:g} ms); {wall * 1e3:.0f} ms in all")
        payload = os.urandom(3 * 1024 * 1024 + 17)
        with socket.create_connection(("127.0.0.1", raw_proxy.port), timeout=30) as sock:
            sock.sendall(payload)
            sock.shutdown(socket.SHUT_WR)
            answer = read_all(sock)
        want = f"{len(payload)} {hashlib.sha256(payload).hexdigest()}\n".encode()
        check(answer == want, f"(e) half-close: 3 MiB sent then shutdown(SHUT_WR); upstream saw end of stream "
                              f"and {answer.split()[0].decode() if answer else 'nothing'} identical bytes; its close "
                              f"reached the client")
        dead = Peer(cleanup, f"127.0.0.1:{free_port()}", rtt_ms, work / "dead-proxy")
        with socket.create_connection(("127.0.0.1", dead.port), timeout=30) as sock:
            start = time.perf_counter()
            try:
                got = sock.recv(1)
            except ConnectionResetError:
                got = b""
            wall = time.perf_counter() - start
        check(got == b"", f"(f) upstream refusing: the client's connection is closed after {wall * 1e3:.0f} ms")

        summaries = {name: p.stop() for name, p in (("http", proxy), ("raw", raw_proxy), ("dead", dead))}
        check(summaries["http"].get("connections", 0) == 22 and summaries["http"].get("active") == 0,
              f"proxy logs: summary of the HTTP proxy {json.dumps(summaries['http'], sort_keys=True)}")
    finally:
        if raw:
            raw.shutdown()
            raw.server_close()
        cleanup.close()
        shutil.rmtree(work, ignore_errors=True)
    print("delay_proxy self-test: " + ("passed" if not failures else f"FAILED ({len(failures)} checks)"))
    return 0 if not failures else 1


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--upstream", metavar="HOST:PORT", help="the server to forward to")
    parser.add_argument("--rtt-ms", type=float, default=50.0, help="round-trip time to add (default 50); "
                        "each direction is delayed by half")
    parser.add_argument("--listen", default="127.0.0.1:0", metavar="HOST:PORT",
                        help="where to listen (default 127.0.0.1:0, a port chosen by the kernel)")
    parser.add_argument("--port-file", type=Path, help="write HOST:PORT here once listening")
    parser.add_argument("--log", type=Path, help="log file (default stderr)")
    parser.add_argument("--no-handshake", action="store_true",
                        help="do not emulate the TCP handshake's round trip on new connections")
    parser.add_argument("--buffer-mib", type=float, default=64,
                        help="bytes in flight per direction before reading pauses (default 64 MiB)")
    parser.add_argument("--self-test", action="store_true",
                        help="check the proxy against python3 -m http.server and a raw TCP server, print figures")
    args = parser.parse_args(argv)
    if args.rtt_ms < 0:
        parser.error("--rtt-ms must be >= 0")
    if args.self_test:
        return _self_test(args.rtt_ms)
    if not args.upstream:
        parser.error("--upstream is required (or --self-test)")
    handler = logging.FileHandler(args.log) if args.log else logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s.%(msecs)03d %(levelname)s %(message)s", "%H:%M:%S"))
    logging.getLogger("delay_proxy").addHandler(handler)
    logging.getLogger("delay_proxy").setLevel(logging.INFO)
    asyncio.run(serve(args))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
