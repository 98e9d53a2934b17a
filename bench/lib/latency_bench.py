"""The team cache a network away (bench/run scenario `latency`): the remote warm
start and the pull comparison again, with a delay proxy (delay_proxy.py) in front
of each server, at each round-trip time (5 and 50 ms). Every request of ccache,
curl and opcache then crosses the "network" both ways; the servers, stores,
commands and checks are those of the loopback scenarios (compile_bench.warm_start,
server_bench.pull_vs_curl), given the proxies' URLs.
"""
import statistics

import compile_bench
import server_bench
from harness import BenchError, log, run
from peers import DelayProxy


def probe_ms(url, path, times=5):
    """Median over `times` fresh connections of curl's time to the first byte of GET url+path, in ms
    (handshake included: with the proxy's emulation, about two RTTs)."""
    figures = []
    for _ in range(times):
        out = run(["curl", "-s", "-o", "/dev/null", "-w", "%{time_starttransfer}", f"{url}{path}"],
                  what=f"curl {url}{path}")
        figures.append(float(out.strip()) * 1e3)
    return statistics.median(figures)


def latency_figures(ctx, rtts_ms, passes, sets, loopback_warm_start=True):
    """For each RTT: proxies in front of opcache serve, nginx (static) and nginx WebDAV; the warm
    start (ccache + WebDAV vs opcache layered vs opcache pull + exec) and the pull (opcache pull
    vs curl --parallel of small and large bundles) through them. With loopback_warm_start, also the
    warm start without proxies (RTT 0, for the chart) when the run has no `warm_start` scenario.
    Returns {"points": [{"rtt_ms", "warm_start", "pull", "probe_ttfb_ms", "proxies"}, ...], ...}."""
    stems = ctx.ckernels.stems
    servers = {"opcache_serve": ctx.serve.url, "nginx": ctx.nginx.url, "nginx_dav": ctx.dav.url}
    probes = {"opcache_serve": "/healthz", "nginx": "/", "nginx_dav": "/"}
    figures = {"rtts_ms": list(rtts_ms), "proxy": "bench/lib/delay_proxy.py: each direction delayed by RTT/2, "
                                                  "the TCP handshake's round trip emulated on new connections",
               "direct_ttfb_ms": {name: probe_ms(url, probes[name]) for name, url in servers.items()},
               "points": []}
    if loopback_warm_start:
        log("latency: warm start on loopback (RTT 0, no proxy)")
        figures["loopback_warm_start"] = compile_bench.warm_start(
            ctx, ctx.ckernels, stems, passes, ctx.serve.url, ctx.dav.url, compile_bench.SCENARIO,
            subdir="latency-warm-start-0ms")
    for rtt in rtts_ms:
        logs = ctx.work / f"latency-{rtt}ms"
        proxies = {}
        try:
            for name, url in servers.items():
                proxies[name] = DelayProxy(ctx.cleanup, url, rtt, logs / f"proxy-{name}")
            log(f"latency: RTT {rtt} ms: delay proxies " +
                ", ".join(f"{name} {p.url} → {servers[name]}" for name, p in proxies.items()))
            probe = {name: probe_ms(p.url, probes[name]) for name, p in proxies.items()}
            log(f"latency: RTT {rtt} ms: time to first byte on a fresh connection through the proxies: " +
                ", ".join(f"{name} {ms:.1f} ms" for name, ms in probe.items()))
            key = next(iter(ctx.keys.values()))
            server_bench.same_bytes(proxies["opcache_serve"].url, proxies["nginx"].url, key, logs)
            log(f"latency: RTT {rtt} ms: warm start through the proxies")
            warm = compile_bench.warm_start(ctx, ctx.ckernels, stems, passes, proxies["opcache_serve"].url,
                                            proxies["nginx_dav"].url, compile_bench.SCENARIO,
                                            fill_url=ctx.dav.url, subdir=f"latency-warm-start-{rtt}ms")
            log(f"latency: RTT {rtt} ms: opcache pull vs curl --parallel through the proxies")
            pull = server_bench.pull_vs_curl(ctx, sets, passes, proxies["opcache_serve"].url,
                                             proxies["nginx"].url, subdir=f"latency-pull-{rtt}ms")
        finally:
            carried = {name: p.stop() for name, p in proxies.items()}
        idle = [name for name, totals in carried.items() if not totals.get("connections")]
        if idle:
            raise BenchError(f"latency: RTT {rtt} ms: no connection went through the proxy of {', '.join(idle)}")
        figures["points"].append({"rtt_ms": rtt, "probe_ttfb_ms": probe, "warm_start": warm, "pull": pull,
                                  "proxies": carried})
        sp = warm["speedup_vs_ccache"]
        log(f"latency: RTT {rtt} ms: warm start ccache {warm['seconds']['ccache_nginx']:.2f} s, opcache layered "
            f"{warm['seconds']['opcache_layered']:.2f} s ({sp['opcache_layered']:.1f}× faster), pull + exec "
            f"{warm['seconds']['opcache_pull_exec']:.2f} s ({sp['opcache_pull_exec']:.1f}× faster)")
    return figures
