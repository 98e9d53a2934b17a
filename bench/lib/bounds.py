"""docs/performance.md's "What bounds the missed targets": for each target this run missed, the
floor measured beside it in the same run, the split this run measured, and the profile that says
where the rest of the time goes. The run's own figures are read from the results; the profiles
are the latest taken by hand, each with the command that took it and its date, since a profiler
cannot run inside the timed passes without changing them.
"""

# Profiles taken by hand (issue 39's "profile first"). Each: what it shows, and how it was taken.
SERVER_PROFILE = [
    "Per small GET, `valgrind --tool=callgrind opcache-serve --threads 2 --anonymous-read --access-log off` "
    "under `wrk -t2 -c512 -d8s` over 100 small bundles, start-up subtracted (2026-11-29): **15.7K instructions "
    "per request, against 9.1K for bench_http_floor** (17.0K before this session's last cuts: the bundle's "
    "content type, the ETag and an absent X-Opcache-Redirect no longer allocate). What is left of opcache's "
    "own work: 11 allocations per request with their frees, about 150 instructions each (the route's path and "
    "key, the route copied into the handler's job, the job itself, the ETag, the header list, the bundle's "
    "digest copied out of the cache; Beast's two and Asio's one the floor pays too); the answer's head rendered "
    "per request ≈ 1.6K; usage statistics ≈ 1.1K; the bundle cache's lookup ≈ 1.1K; the handler's plan and "
    "call ≈ 1.1K; metrics ≈ 0.6K; header look-ups ≈ 0.5K. No single item is large.",
    "What grows from 64 to 512 connections, `perf record -F 5000 -g -p <opcache-serve>` during `wrk -t2` at each "
    "(2026-11-29), in points of the server's CPU: the session's request state written in `Session::on_header` "
    "(`std::string` assignments: 0.65 → 2.23), Beast's parser (1.30 → 2.04), malloc/free (2.5 → 3.9), Asio's "
    "timer queue (0.19 → 0.75; one timer per connection in its heap). At 512 connections each session's state "
    "is out of the cache when its next request comes, so every byte opcache writes per request costs a miss; "
    "the floor writes almost none, which is why its CPU per request barely moves between the two.",
    "1 MB bundles, `perf record -F 5000 -g` and `strace -f -c` of opcache serve under `wrk -t2 -c64` over four "
    "1 MB bundles (2026-11-29): 89 % of its CPU is in the kernel (sendfile's splice of page-cache pages into the "
    "socket, TCP), 10 % in user space; each answer is one `sendto` (the head) and one `sendfile` (the body). "
    "nginx sends the same body by sendfile, with its head corked in front of it (`tcp_nopush`); opcache serve "
    "sends the head on its own first. Not profiled further: the next step for these cells.",
]

STORE_PROFILE = [
    "`Store::get` = writing the files as the publish floor does + reading and decoding the object: bench_store "
    "times the two halves apart (rows above). The decode is the object read whole (one `open`, `fstat`, `read`), "
    "its SHA-256 (SHA-NI: 2–3 µs for a small kernel), the manifest scan and zstd; in callgrind (`valgrind "
    "--tool=callgrind --toggle-collect='opcache::Store::get(*' bench_store`, 2026-11-29) zstd takes 64M and the "
    "manifest's read 57M of the 132M instructions left once the SHA-256 (which valgrind runs in software) is "
    "set aside.",
    "Both halves pay ext4's inode allocation for every file written (`ext4_create` → `find_inode_bit` → "
    "`recently_deleted` was 45 % of get's samples in `perf record --call-graph dwarf`, 2026-11-29: the bench "
    "deletes its outputs after each hit, and ext4 skips inodes freed in the last minutes). The floor writes the "
    "same files, so the ratio measures the decode against it.",
]

HIT_PROFILE = [
    "A warm hit against /bin/true started the same way (the floor row): `perf stat -r 200` shows 129 page faults "
    "for the hit (2026-11-29, after the hit-path order was regenerated: 134 before); callgrind counts 1.56M "
    "instructions (1.63M before the store's opening checked its subdirectories by fstatat alone and PATH was "
    "searched as text): the store's opening and the exec manifest's scan ≈ 0.33M, the bundle's decode ≈ 0.2M, "
    "CLI11's option registration ≈ 0.13M, malloc/free ≈ 0.3M across all of them (1,417 allocations). 219 system "
    "calls, most of them stats (69 of the manifest's absent paths, which must be checked; vouching for them by "
    "their directories' identities instead measured no faster: `farm-bench -n 100` A/B 0.99–1.00). In "
    "`perf record` of 300 hits, the kernel (exec, page faults, the calls) takes 45 % of the hit's time, the "
    "dynamic loader 12 % (a third of it the CPUID probes of glibc's start-up, which every process pays), "
    "opcache's own code 21 % and libc 13 %.",
]

# A miss of `opcache exec` (the compile under the tracer, stored with its exec manifest) against
# the compile alone, p50 over kernels of the per-kernel ratio of medians (issue 36).
MISS_RATIO = 1.05

MISS_PROFILE = [
    "Per notified call (2026-11-30, Linux 6.18 under Firecracker, 2 vCPUs): 15-22 µs for a round trip to "
    "the listener, measured as 2,000 `faccessat` system calls made directly (not through the C library, so "
    "the preload library does not take them) by a program run under the tracer, against 0.9 µs untraced. "
    "A compile of `gcc -O2 -c` still has 65-75 notified calls with the preload library: the dynamic "
    "loader's own look-ups and library opens in gcc, cc1 and as (before any preloaded code runs), the "
    "execve calls, and the calls that name /proc, /sys or /dev.",
    "Per traced process: 0.30 ms without the preload library, 0.52 ms with it (a shell running /bin/true "
    "200 times, traced against untraced; the library is loaded, relocated and started in each process).",
    "A trace's fixed cost: 1.2 ms (/bin/true traced against spawned: the tracing and listening threads, the "
    "child's filter, its first stop, the listener taken over).",
    "The tracer's own CPU: 2.3 ms per compile on its two threads (`perf record -g` of 20 traced compiles, "
    "the tracer built with frame pointers: answering and classifying each call, reading the path from the "
    "tracee's memory, the program's ELF headers at each execve).",
    "The seeded miss beyond the tracer alone (the two rows' difference) is exec's own work: its start and "
    "options, the key and lookup, digesting what the compile read, the bundle, the index rows and the "
    "manifest (timed step by step in `git show 004aa2d:docs/performance.md`).",
]


def _missed(rows, words):
    """Whether a missed row's figure contains every one of `words`."""
    return any(row["met"] is False and all(w in row["figure"] for w in words) for row in rows)


def _server_lines(server_cells):
    """The run's CPU per request in every server cell, as (cell, pair) of report._server_cells."""
    return [_cpu_line(cell, pair) for cell, pair in server_cells
            if cell["opcache_serve"].get("server_cpu_us_per_request")]


def _cpu_line(cell, pair):
    """One cell's CPU per request: opcache serve's, nginx's and (logs off) the floor's."""
    o, n, f = cell["opcache_serve"], cell["nginx"], cell.get("http_floor") or {}
    floor = f.get("server_cpu_us_per_request")
    floor_text = (f", bench_http_floor {floor} µs ({f['requests_per_second'] / n['requests_per_second']:.2f}× "
                  f"nginx's requests/s)") if floor else ""
    return (f"* {cell['bundles']} bundles, {cell['connections']} connections, {pair}: opcache serve "
            f"{o['server_cpu_us_per_request']} µs of CPU per request ({cell['ratio_rps']:.2f}× nginx's "
            f"requests/s), nginx {n['server_cpu_us_per_request']} µs{floor_text}.")


def _miss_floor_lines(miss):
    """The run's arithmetic of the traced miss: opcache's start and the mechanism's floor, added."""
    if not miss.get("ratio_notify_floor_vs_gcc"):
        return []
    start = miss["ratio_disable_vs_gcc"]["p50"] - 1
    mechanism = miss["ratio_notify_floor_vs_gcc"]["p50"] - 1
    tracer = miss["ratio_trace_floor_vs_gcc"]["p50"] - 1
    return [f"In this run, starting opcache and the compile from it (`--mode disable`) adds {100 * start:.1f} % "
            f"to the compile, and the tracer's mechanism alone, answering every notified call at once, "
            f"{100 * mechanism:.1f} %: {100 * (start + mechanism):.1f} % together, before the tracer reads a "
            f"single call, against a target of {100 * (MISS_RATIO - 1):.0f} %. The tracer alone adds "
            f"{100 * tracer:.1f} %.", ""]


def bounds_section(r, rows, server_cells):
    """Markdown lines for the missed targets of results `r` (rows as figure_rows made them;
    server_cells: every server cell with the name of its pair, report._server_cells)."""
    out = []
    if _missed(rows, ["GETs of"]):
        out += ["### The server (issue 39)", "",
                "Where a cell misses 0.9× nginx, the floor beside it (bench_http_floor: opcache serve's framework, "
                "doing no work of its own per request) shows what the framework allows, and the CPU each server "
                "spent per request in the same passes shows what bounds the throughput: wrk shares the two cores, "
                "so a server that spends more CPU per request answers fewer of them. In this run:", ""]
        out += _server_lines(server_cells) + [""]
        out += [f"* {p}" for p in SERVER_PROFILE] + [""]
    s = r.get("store") or {}
    if _missed(rows, ["Store::get", "atomic-publish floor"]):
        out += ["### The in-process hit (issue 39)", ""]
        if s.get("verify_p50_us") and s.get("publish_p50_us"):
            decode, floor, hit = s["verify_p50_us"], s["publish_p50_us"], s["hit_p50_us"]
            out += [f"In this run the publish floor took {floor:.1f} µs and the decode {decode:.1f} µs (p50 each): "
                    f"{floor + decode:.1f} µs together against get's {hit:.1f} µs. At 1.1× the floor, the decode "
                    f"would have to fit in {0.1 * floor:.1f} µs.", ""]
        out += [f"* {p}" for p in STORE_PROFILE] + [""]
    if _missed(rows, ["warm hit"]):
        out += ["### The exec hit (issue 36)", ""] + [f"* {p}" for p in HIT_PROFILE] + [""]
    if _missed(rows, ["traced miss"]):
        out += ["### The traced miss (issue 36)", ""] + _miss_floor_lines(r.get("miss") or {})
        out += ["The split rows above (`--mode disable`, the seeded miss, the two floors) are this run's; the "
                "profile:", ""]
        out += [f"* {p}" for p in MISS_PROFILE] + [""]
    if not out:
        return []
    return ["## What bounds the missed targets", ""] + out
