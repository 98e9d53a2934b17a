"""What every bench/run scenario shares: progress on stderr, running and
timing commands with their exit status checked, statistics, the machine, free
ports, and the cleanup of servers and temp directories. Standard library only.
"""
import json
import os
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

T0 = time.monotonic()


class BenchError(Exception):
    """A measured command failed or did not do what it must (a miss where a hit was due, wrong bytes)."""


def log(message):
    """One progress line on stderr, prefixed by the seconds elapsed since start."""
    print(f"[{time.monotonic() - T0:7.1f}s] {message}", file=sys.stderr, flush=True)


def clean_env(**extra):
    """The environment without the caller's opcache, ccache and Ascend settings, plus `extra`."""
    drop = ("OPCACHE_", "CCACHE_", "ASCEND_", "RANK_", "MS_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env.update({k: str(v) for k, v in extra.items()})
    # Stores of the benchmark never age (the CANN default limit is 500 MB).
    env.setdefault("ASCEND_MAX_OP_CACHE_SIZE", "1000000")
    return env


def run(command, env=None, cwd=None, stdout=subprocess.PIPE, what=None, timeout=None):
    """Runs `command`; returns its stdout (text, or None when redirected). Raises BenchError
    with the command, exit status and stderr tail on a non-zero exit."""
    done = subprocess.run([str(c) for c in command], env=env, cwd=cwd, stdout=stdout,
                          stderr=subprocess.PIPE, text=True, timeout=timeout)
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-8:])
        raise BenchError(f"{what or ' '.join(map(str, command))} exited {done.returncode}:\n{tail}")
    return done.stdout


def timed(command, env=None, cwd=None, what=None):
    """Runs `command` with output discarded; returns its wall time in seconds (exit status checked)."""
    start = time.perf_counter()
    run(command, env=env, cwd=cwd, stdout=subprocess.DEVNULL, what=what)
    return time.perf_counter() - start


def timed_faults(command, env=None, cwd=None, what=None):
    """Like timed; returns (wall seconds, minor page faults): the faults of the command's process
    and of every process it waited for (getrusage of this process's waited-for children)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt
    seconds = timed(command, env=env, cwd=cwd, what=what)
    return seconds, resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt - before


def median(values):
    return statistics.median(values) if values else None


def percentile(values, p):
    """The p-th percentile (0..100) by linear interpolation; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    at = (len(ordered) - 1) * p / 100
    low = int(at)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (at - low)


def distribution(values):
    """p10/p50/p90/p99, min, max and count of `values`."""
    return {"count": len(values), "min": min(values), "p10": percentile(values, 10),
            "p50": percentile(values, 50), "p90": percentile(values, 90),
            "p99": percentile(values, 99), "max": max(values)}


def ratio(a, b):
    return a / b if a is not None and b else None


def loadavg():
    return Path("/proc/loadavg").read_text().split()[:3]


def machine(build_dir: Path):
    """The CPU model, cores, memory, kernel, and the file system of the build directory."""
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), "unknown")
    mem = next((int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines()
                if line.startswith("MemTotal:")), 0)
    fs = subprocess.run(["findmnt", "-n", "-o", "FSTYPE,OPTIONS", "--target", str(build_dir)],
                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout.strip()
    uname = os.uname()
    return {"cpu_model": cpu, "cores": os.cpu_count(), "mem_total_kib": mem,
            "kernel": f"{uname.sysname} {uname.release}", "arch": uname.machine,
            "build_dir_file_system": fs.splitlines()[0] if fs else "unknown"}


def free_port():
    """A TCP port free on 127.0.0.1 now (the kernel picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_kib(pid, field="VmRSS"):
    """The process's resident set (VmRSS) or peak (VmHWM) in KiB; 0 when it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def cpu_ns(pids):
    """Nanoseconds the processes `pids` have run on a CPU, summed over their threads
    (/proc/PID/task/*/schedstat); a process or thread gone counts 0."""
    total = 0
    for pid in pids:
        try:
            tasks = list(Path(f"/proc/{pid}/task").iterdir())
        except OSError:
            continue
        for task in tasks:
            try:
                total += int((task / "schedstat").read_text().split()[0])
            except (OSError, IndexError, ValueError):
                pass
    return total


def wait_until(condition, seconds, what):
    """Polls `condition()` every 50 ms until true; raises BenchError after `seconds`."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise BenchError(f"timed out after {seconds} s waiting for {what}")
        time.sleep(0.05)


def read_json(path):
    return json.loads(Path(path).read_text())


class Cleanup:
    """Servers and temp directories to stop and remove on exit, Ctrl-C and SIGTERM included.
    Servers stop in reverse start order: SIGTERM, then SIGKILL after 10 s."""

    def __init__(self, keep=False):
        self.keep = keep
        self.processes = []
        self.dirs = []
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)  # also when started in the background (SIGINT ignored)

    def _on_signal(self, signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")

    def tempdir(self, prefix):
        path = Path(tempfile.mkdtemp(prefix=prefix))
        self.dirs.append(path)
        return path

    def start(self, command, log_path, env=None, cwd=None):
        """Starts a server (stdout and stderr to log_path); returns its Popen, stopped by close()."""
        with open(log_path, "ab") as out:
            process = subprocess.Popen([str(c) for c in command], env=env, cwd=cwd, stdout=out,
                                       stderr=subprocess.STDOUT, start_new_session=True)
        self.processes.append(process)
        return process

    def stop(self, process):
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if process in self.processes:
            self.processes.remove(process)

    def close(self):
        for process in reversed(list(self.processes)):
            self.stop(process)
        for path in self.dirs:
            if self.keep:
                log(f"kept {path}")
            else:
                shutil.rmtree(path, ignore_errors=True)
        self.dirs = []
