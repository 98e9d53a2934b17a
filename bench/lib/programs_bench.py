"""Scenarios measured by programs of the repository (bench/run): bench_store's
in-process hit vs plain copy, bench_aging's index lookup and gc at scale, and
the refcc model (cold / warm / 8 ranks) through scripts/refcc_demo.py.
"""
import subprocess

from harness import BenchError, clean_env, log, read_json, run


def find_key(obj, key):
    """The first value of `key` anywhere in a JSON document (depth first); None when absent."""
    if isinstance(obj, dict):
        if key in obj:
            return obj[key]
        children = obj.values()
    elif isinstance(obj, list):
        children = obj
    else:
        return None
    for child in children:
        found = find_key(child, key)
        if found is not None:
            return found
    return None


def dig(obj, *path):
    for step in path:
        if not isinstance(obj, dict) or step not in obj:
            return None
        obj = obj[step]
    return obj


def store_figures(ctx, kernels, hits, index_entries):
    """bench_store: in-process hit (Store::get) vs plain copy p50/p99 in µs, and the index lookup p99."""
    out = ctx.results_dir / "bench_store.json"
    log(f"bench_store --kernels {kernels} --hits {hits} --index-entries {index_entries}")
    run([ctx.build / "bench" / "bench_store", "--kernels", kernels, "--hits", hits, "--index-entries", index_entries,
         "--corpus", ctx.corpus_root / "bench_store", "--json", out], env=clean_env(), what="bench_store")
    doc = read_json(out)
    hit = dig(doc, "store", "hit_latency_new_files") or {}
    fallback = {"hit_p50_us": dig(hit, "get", "wall", "p50_us"), "hit_p99_us": dig(hit, "get", "wall", "p99_us"),
                "copy_p50_us": dig(hit, "plain_copy", "wall", "p50_us"),
                "copy_p99_us": dig(hit, "plain_copy", "wall", "p99_us"),
                "publish_p50_us": dig(hit, "plain_copy_publish", "wall", "p50_us"),
                "verify_p50_us": dig(hit, "object_verified_in_memory", "wall", "p50_us")}
    figures = {}
    for key, value in fallback.items():
        direct = find_key(doc, key)
        figures[key] = direct if direct is not None else value
    figures["source"] = "bench_store keys hit_*_us/copy_*_us" if find_key(doc, "hit_p50_us") is not None \
        else "bench_store store.hit_latency_new_files (get, plain_copy)"
    figures["index_entries"] = index_entries
    figures["index_lookup_p99_us"] = dig(doc, "index", "lookup_present", "p99_us") or \
        dig(doc, "index", "lookup_present", "wall", "p99_us")
    figures["kernels"], figures["hits"] = kernels, hits
    figures["ratio_p50"] = figures["hit_p50_us"] / figures["copy_p50_us"] if figures["copy_p50_us"] else None
    figures["ratio_p99"] = figures["hit_p99_us"] / figures["copy_p99_us"] if figures["copy_p99_us"] else None
    return figures


def aging_figures(ctx, entries):
    """bench_aging --scale-entries N: lookup p50/p99 and gc of 10 % at N entries; "not available"
    when this bench_aging has no such mode."""
    binary = ctx.build / "bench" / "bench_aging"
    usage = subprocess.run([str(binary), "--help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True).stdout
    if "--scale-entries" not in usage:
        log("bench_aging has no --scale-entries mode: index lookup and gc at scale not available")
        return {"available": False, "entries": entries,
                "reason": "bench_aging has no --scale-entries mode in this build"}
    out = ctx.results_dir / "bench_aging.json"
    log(f"bench_aging --scale-entries {entries}")
    run([binary, "--scale-entries", entries, "--corpus", ctx.corpus_root / "bench_store", "--json", out],
        env=clean_env(), what="bench_aging --scale-entries")
    scale = find_key(read_json(out), "scale")
    if not isinstance(scale, dict):
        raise BenchError(f"bench_aging wrote no \"scale\" object to {out}")
    return {"available": True, **scale}


def refcc_figures(ctx, models, repeat, ranks=8):
    """refcc model: no cache, cold, warm and `ranks` at once (scripts/refcc_demo.py), per model."""
    results = {}
    for model in models:
        out = ctx.results_dir / f"refcc-{model}.json"
        log(f"refcc {model}: no cache / cold / warm / {ranks} ranks, repeat {repeat}")
        run(["python3", ctx.repo / "scripts" / "refcc_demo.py", "--build", ctx.build, "--model", model,
             "--repeat", repeat, "--ranks", ranks, "--baseline", "--json", out], env=clean_env(),
            what=f"refcc_demo.py {model}")
        doc = read_json(out)
        results[model] = {"kernels": doc["kernels"], "ops": doc["ops"], "repeat": repeat,
                          "no_cache_s": dig(doc, "no_cache", "wall_s"), "cold_s": doc["cold"]["wall_s"],
                          "warm_s": doc["warm"]["wall_s"], "ranks": ranks, "ranks_s": doc["ranks"]["wall_s"],
                          "builds_per_key": doc["ranks"]["builds_per_key"],
                          "warm_speedup": doc["cold"]["wall_s"] / doc["warm"]["wall_s"]}
    return results
