"""Team single flight: `refcc model` on N "machines" (separate cache directories)
at once against one `opcache serve`, cold: one machine alone, N machines without
team single flight (OPCACHE_TEAM_SINGLE_FLIGHT=0: every machine compiles every
kernel), and N machines with it (each kernel compiled once in the team).

Part of bench/run (scenario "team"); also runs on its own:
  python3 bench/lib/team_bench.py --build build --model resnet50 --machines 4
"""
import argparse
import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import BenchError, Cleanup, clean_env, loadavg, log  # noqa: E402
from peers import OpcacheServe  # noqa: E402

REPO = Path(__file__).resolve().parent.parent.parent
TOKEN = "bench-team-token"


def run_machines(build: Path, model: Path, work: Path, server_url: str, machines: int, team: bool, jobs: int):
    """Starts `machines` refcc processes at once; returns (wall seconds, their --json reports)."""
    env = clean_env(OPCACHE_REMOTE=f"{server_url}|upload", OPCACHE_TOKEN=TOKEN,
                    OPCACHE_TEAM_SINGLE_FLIGHT="1" if team else "0")
    started = time.monotonic()
    processes = []
    for m in range(machines):
        command = [build / "refcc" / "refcc", "model", model, "-o", work / f"out{m}", "--cache-dir",
                   work / f"machine{m}", "-j", str(jobs), "--json"]
        processes.append(subprocess.Popen([str(c) for c in command], env=env, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True))
    reports = []
    for process in processes:
        out, err = process.communicate()
        if process.returncode != 0:
            raise BenchError(f"refcc model exited {process.returncode}: {err[-800:]}")
        reports.append(json.loads(out.strip().splitlines()[-1]))
    return time.monotonic() - started, reports


def team_counter(build: Path, cache: Path, name: str) -> int:
    out = subprocess.run([str(build / "opcache"), "--cache-dir", str(cache), "--no-remote", "--json", "stats"],
                         env=clean_env(), capture_output=True, text=True, check=True).stdout
    return int(json.loads(out)["counters"].get(name, 0))


def team_figures(build: Path, work: Path, cleanup, model_name="resnet50", machines=4, jobs=2):
    """The three runs, each against a fresh server; returns the figures as a dict."""
    model = REPO / "examples" / "models" / f"{model_name}.json"
    figures = {"model": model_name, "machines": machines, "jobs_per_machine": jobs}
    tokens = work / "tokens"
    work.mkdir(parents=True, exist_ok=True)
    tokens.write_text(hashlib.sha256(TOKEN.encode()).hexdigest() + " bench read,write\n")
    for name, count, team in (("alone", 1, True), ("without_team", machines, False), ("with_team", machines, True)):
        run_dir = work / name
        server = OpcacheServe(cleanup, build / "opcache", run_dir / "storage", run_dir / "serve", 2,
                              extra=["--tokens", tokens])
        log(f"team: {name}: {count} machine(s), refcc model {model_name} -j{jobs}, load {loadavg()}")
        wall, reports = run_machines(build, model, run_dir, server.url, count, team, jobs)
        builds = sum(r["builds"] for r in reports)
        figures[name] = {"wall_s": round(wall, 2), "machines": count, "kernels": reports[0]["distinct_kernels"],
                         "compiles": builds,
                         "team_builds": sum(team_counter(build, run_dir / f"machine{m}", "team_builds")
                                            for m in range(count)),
                         "team_waits": sum(team_counter(build, run_dir / f"machine{m}", "team_waits")
                                           for m in range(count))}
        log(f"team: {name}: {wall:.1f} s, {builds} compiles for {reports[0]['distinct_kernels']} kernels")
        cleanup.stop(server.process)
    if figures["with_team"]["compiles"] != figures["with_team"]["kernels"]:
        raise BenchError(f"with team single flight, {figures['with_team']['compiles']} compiles for "
                         f"{figures['with_team']['kernels']} kernels (expected one each)")
    figures["with_vs_alone"] = round(figures["with_team"]["wall_s"] / figures["alone"]["wall_s"], 2)
    figures["without_vs_with"] = round(figures["without_team"]["wall_s"] / figures["with_team"]["wall_s"], 2)
    return figures


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", type=Path, default=REPO / "build-bench", help="build directory (opcache, refcc/)")
    parser.add_argument("--model", default="resnet50", help="examples/models/NAME.json (default resnet50)")
    parser.add_argument("--machines", type=int, default=4)
    parser.add_argument("--jobs", type=int, default=2, help="refcc -j per machine (default 2)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/opcache-team-bench"))
    args = parser.parse_args()
    if args.work.exists():
        subprocess.run(["rm", "-rf", str(args.work)], check=True)
    cleanup = Cleanup()
    try:
        figures = team_figures(args.build.resolve(), args.work, cleanup, args.model, args.machines, args.jobs)
    finally:
        cleanup.close()
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
