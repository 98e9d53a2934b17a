"""Tests of the Python binding (python/opcache), standard library only.

Run with the system Python:
    python/tests/run_tests.sh <build dir>
or
    OPCACHE_LIBRARY=build/libopcache.so OPCACHE_CLI=build/opcache \
        /usr/bin/python3 -m unittest discover -s python/tests -v
"""

from __future__ import annotations

import json
import multiprocessing
import os
import pickle
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import unittest
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))

import opcache  # noqa: E402

CLI = Path(os.environ.get("OPCACHE_CLI", str(REPO / "build" / "opcache")))
SCENARIO = "device=single,phase=train,toolchain=8.0.RC2,soc=Ascend910B1"
SCENARIO_DICT = {"device_mode": "single", "phase": "train", "toolchain": "8.0.RC2", "soc": "Ascend910B1"}


def setUpModule() -> None:
    # Settings from the caller's environment must not change what is tested.
    for name in list(os.environ):
        if name.startswith("OPCACHE_") and name not in ("OPCACHE_LIBRARY", "OPCACHE_CLI"):
            del os.environ[name]
    for name in ("RANK_SIZE", "LOCAL_WORLD_SIZE", "ASCEND_MAX_OP_CACHE_SIZE", "ASCEND_REMAIN_CACHE_SIZE_RATIO"):
        os.environ.pop(name, None)


def descriptor(op_type: str = "MatMul", n: int = 0) -> dict:
    return {
        "op_type": op_type,
        "inputs": [
            {"shape": [16, 32 + n], "dtype": "float16", "format": "ND"},
            {"shape": [32 + n, 64], "dtype": "float16", "format": "ND"},
        ],
        "outputs": [{"shape": [16, 64], "dtype": "float16", "format": "ND"}],
        "attrs": {"transpose_a": False, "transpose_b": False, "big": 2**60 + 1},
    }


def write_kernel(work_dir: Path, name: str, payload: bytes) -> None:
    (work_dir / f"{name}.o").write_bytes(payload)
    (work_dir / f"{name}.json").write_text(json.dumps({"kernelName": name, "binFileName": name}))


def _mp_worker(cache_dir: str, out_root: str, counter: str, worker: int) -> list[tuple[int, str, list[str]]]:
    """One process of the single-flight test: 10 keys in a shuffled order."""
    outcomes = []
    order = list(range(10))
    random.Random(worker).shuffle(order)
    with opcache.Store(cache_dir) as store:
        for i in order:

            def build(work_dir: Path, i: int = i) -> None:
                fd = os.open(counter, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
                try:
                    os.write(fd, f"{i}\n".encode())
                finally:
                    os.close(fd)
                time.sleep(0.05)  # keep the build window open so the others must wait
                write_kernel(work_dir, f"k{i}", f"kernel {i}".encode() * 100)

            result = store.get_or_build(descriptor("MatMul", i), SCENARIO, Path(out_root) / f"w{worker}", build)
            outcomes.append((i, result.source, [path.name for path in result.files]))
    return outcomes


class TempDirTestCase(unittest.TestCase):
    def setUp(self) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="opcache-py-test-")
        self.tmp = Path(self._tmp.name)
        self.cache_dir = self.tmp / "cache"

    def tearDown(self) -> None:
        self._tmp.cleanup()

    def store(self, **options) -> opcache.Store:
        store = opcache.Store(self.cache_dir, **options)
        self.addCleanup(store.close)
        return store


class KeyTest(TempDirTestCase):
    def cli_key(self, descriptor_text: str, scenario_spec: str) -> str:
        if not CLI.exists():
            self.skipTest(f"opcache CLI not found at {CLI} (set OPCACHE_CLI)")
        path = self.tmp / "desc.json"
        path.write_text(descriptor_text)
        completed = subprocess.run(
            [str(CLI), "--cache-dir", str(self.cache_dir), "key", "--desc", str(path), "--scenario", scenario_spec],
            capture_output=True,
            text=True,
            timeout=30,
        )
        self.assertEqual(completed.returncode, 0, completed.stderr)
        return completed.stdout.strip()

    def test_key_equals_cli_for_every_scenario_form(self) -> None:
        store = self.store()
        desc = descriptor()
        expected = self.cli_key(json.dumps(desc), SCENARIO)
        self.assertRegex(expected, r"^[0-9a-f]{64}$")
        scenario_object = opcache.Scenario(device_mode="single", phase="train", toolchain="8.0.RC2", soc="Ascend910B1")
        for scenario in (SCENARIO, SCENARIO_DICT, scenario_object, json.dumps(SCENARIO_DICT)):
            with self.subTest(scenario=scenario):
                self.assertEqual(store.key(desc, scenario), expected)
        # A JSON string with other key order and whitespace is the same descriptor.
        reordered = json.dumps(dict(reversed(list(desc.items()))), indent=3)
        self.assertEqual(store.key(reordered, SCENARIO), expected)

    def test_key_equals_cli_with_extra_and_large_integers(self) -> None:
        store = self.store()
        desc = descriptor("Conv2D")
        desc["attrs"]["big"] = 2**63 + 7  # beyond 2^53: must stay exact
        spec = "device=multi,phase=infer,toolchain=7.0.0,soc=Ascend310P3,extra.python=3.11"
        expected = self.cli_key(json.dumps(desc), spec)
        scenario = opcache.Scenario(
            device_mode="multi", phase="infer", toolchain="7.0.0", soc="Ascend310P3", extra={"python": "3.11"}
        )
        self.assertEqual(store.key(desc, scenario), expected)
        self.assertEqual(store.key(desc, spec), expected)
        desc["attrs"]["big"] += 1
        self.assertNotEqual(store.key(desc, spec), expected)

    def test_scenarios_differ_in_key(self) -> None:
        store = self.store()
        train = store.key(descriptor(), SCENARIO)
        infer = store.key(descriptor(), SCENARIO.replace("train", "infer"))
        self.assertNotEqual(train, infer)

    def test_scenario_to_json(self) -> None:
        scenario = opcache.Scenario(phase="train", toolchain="8.0.RC2", soc="Ascend910B1")
        self.assertEqual(json.loads(scenario.to_json()), {"phase": "train", "toolchain": "8.0.RC2", "soc": "Ascend910B1"})
        scenario.extra["debug"] = "1"
        self.assertEqual(json.loads(scenario.to_json())["extra"], {"debug": "1"})


class ErrorTest(TempDirTestCase):
    def test_bad_scenario_is_usage_error_naming_the_field(self) -> None:
        store = self.store()
        cases = [
            ("phase=tran,toolchain=8.0.RC2,soc=Ascend910B1", "phase"),
            ("phase=train,soc=Ascend910B1", "toolchain"),
            ({"phase": "train", "toolchain": "8.0.RC2"}, "soc"),
            ({"phase": "train", "toolchain": "8.0.RC2", "soc": "x", "colour": "red"}, "colour"),
            (opcache.Scenario(phase="train", toolchain="8.0.RC2", soc="x", device_mode="many"), "device"),
        ]
        for scenario, field in cases:
            with self.subTest(scenario=scenario):
                with self.assertRaises(opcache.UsageError) as caught:
                    store.key(descriptor(), scenario)
                self.assertIn(field, str(caught.exception))
                self.assertEqual(caught.exception.status, "usage")
                self.assertEqual(caught.exception.code, 2)
                self.assertIsInstance(caught.exception, opcache.OpcacheError)
                # get_or_build validates before building anything.
                with self.assertRaises(opcache.UsageError):
                    store.get_or_build(descriptor(), scenario, self.tmp / "out", lambda work_dir: self.fail("built"))

    def test_bad_descriptor_is_usage_error(self) -> None:
        store = self.store()
        with self.assertRaises(opcache.UsageError) as caught:
            store.key({"inputs": []}, SCENARIO)
        self.assertIn("op_type", str(caught.exception))
        with self.assertRaises(opcache.UsageError):
            store.key("{not json", SCENARIO)
        with self.assertRaises(opcache.UsageError):
            store.key({"op_type": "Add", "x": float("nan")}, SCENARIO)
        with self.assertRaises(TypeError):
            store.key(42, SCENARIO)  # type: ignore[arg-type]

    def test_bad_option_is_usage_error(self) -> None:
        with self.assertRaises(opcache.UsageError) as caught:
            opcache.Store(self.cache_dir, mode="sometimes")
        self.assertIn("sometimes", str(caught.exception))

    def test_every_setting_of_the_table_is_a_keyword(self) -> None:
        # The keywords come from the library's settings table: walk it.
        samples = {"integer": None, "text": None, "comma_list": ["MatMul", "Conv2D"], "flag": True}
        for name, row in opcache.SETTINGS.items():
            with self.subTest(setting=name):
                if name == "signing_key":
                    value = self.tmp / "signing.pem"
                    if not value.exists():
                        made = subprocess.run([str(CLI), "trust", "keygen", "k", "--out", str(value)], capture_output=True)
                        self.assertEqual(made.returncode, 0, made.stderr)
                elif name == "trusted_keys":
                    value = self.tmp / "trusted.keys"
                    value.write_text("# no keys\n")
                elif name == "require_signature":
                    value = "remote"
                elif row["type"] == "path":
                    value = self.tmp / name
                    if name != "cache_dir":
                        value.write_text("[cache]\n")  # reads as a config file and as a token
                elif row["type"] == "repeated":
                    value = [f"file://{self.tmp / 'remote'}"]
                else:
                    value = samples[row["type"]] or (int(row["default"]) if row["type"] == "integer" else row["default"])
                if name == "cache_dir":
                    opcache.Store(value).close()
                    continue
                with opcache.Store(self.cache_dir, **{name: value}) as store:
                    self.assertIn(name, store.options)
        self.assertEqual(
            set(opcache.SETTINGS),
            {"cache_dir", "config_file", "mode", "min_idle_s", "op_debug_level", "op_debug_list", "volatile_fields",
             "wait_timeout_s", "signing_key", "trusted_keys", "require_signature", "team_single_flight", "remotes", "no_remote", "token_file",
             "shared_group", "compiler_check", "exec_env", "base_dir", "compression_level", "revocation_check_interval_s"},
        )

    def test_unknown_keyword_is_type_error(self) -> None:
        with self.assertRaises(TypeError) as caught:
            opcache.Store(self.cache_dir, colour="blue")
        self.assertIn("colour", str(caught.exception))
        with self.assertRaises(TypeError):
            opcache.Store(self.cache_dir, max_op_cache_size=1)  # environment and op_cache.ini only

    def test_put_of_missing_file_raises(self) -> None:
        store = self.store()
        with self.assertRaises(opcache.OpcacheError) as caught:
            store.put(descriptor(), SCENARIO, [self.tmp / "missing.o"])
        self.assertIn("missing.o", str(caught.exception))

    def test_missing_library_is_a_clear_import_error(self) -> None:
        env = dict(os.environ, OPCACHE_LIBRARY=str(self.tmp / "nowhere" / "libopcache.so"))
        completed = subprocess.run(
            [sys.executable, "-c", "import opcache"],
            env=env,
            cwd=str(REPO / "python"),
            capture_output=True,
            text=True,
            timeout=30,
        )
        self.assertNotEqual(completed.returncode, 0)
        self.assertIn("ImportError", completed.stderr)
        self.assertIn("nowhere/libopcache.so", completed.stderr)
        self.assertIn("OPCACHE_LIBRARY", completed.stderr)


class PutGetTest(TempDirTestCase):
    def compile_object(self) -> Path:
        compiler = shutil.which("cc") or shutil.which("gcc")
        if compiler is None:
            self.skipTest("no C compiler to produce a real object file")
        source = self.tmp / "add_kernel.c"
        source.write_text("int add_kernel(int a, int b) { return a + b; }\n")
        obj = self.tmp / "add_kernel.o"
        subprocess.run([compiler, "-c", str(source), "-o", str(obj)], check=True, timeout=60)
        return obj

    def test_put_get_round_trip_is_byte_exact(self) -> None:
        store = self.store()
        obj = self.compile_object()
        meta = self.tmp / "add_kernel.json"
        meta.write_text(json.dumps({"kernelName": "add_kernel", "magic": "RT_DEV_BINARY_MAGIC_ELF"}))
        key = store.put(descriptor("Add"), SCENARIO, [obj, str(meta)], build_ms=1234)
        self.assertEqual(key, store.key(descriptor("Add"), SCENARIO))
        self.assertTrue(store.has(key))
        out = self.tmp / "out" / "nested"
        self.assertTrue(store.get(key, out))
        self.assertEqual(sorted(path.name for path in out.iterdir()), ["add_kernel.json", "add_kernel.o"])
        self.assertEqual((out / "add_kernel.o").read_bytes(), obj.read_bytes())
        self.assertEqual((out / "add_kernel.json").read_bytes(), meta.read_bytes())
        # A second put of the same key keeps the entry.
        self.assertEqual(store.put(descriptor("Add"), SCENARIO, obj), key)
        self.assertEqual(store.stats()["entries"], 1)

    def test_miss(self) -> None:
        store = self.store()
        key = store.key(descriptor("Absent"), SCENARIO)
        out = self.tmp / "out"
        self.assertFalse(store.get(key, out))
        self.assertFalse(store.has(key))
        self.assertFalse(store.remove(key))
        self.assertFalse(out.exists() and any(out.iterdir()))

    def test_remove(self) -> None:
        store = self.store()
        payload = self.tmp / "k.o"
        payload.write_bytes(b"\x7fELF" + bytes(range(256)))
        key = store.put(descriptor(), SCENARIO, [payload])
        self.assertTrue(store.remove(key))
        self.assertFalse(store.has(key))
        self.assertFalse(store.get(key, self.tmp / "out"))

    def test_stats_counts(self) -> None:
        store = self.store()
        self.assertEqual(store.stats()["entries"], 0)
        desc = descriptor("Relu")
        store.get_or_build(desc, SCENARIO, self.tmp / "a", lambda work_dir: write_kernel(work_dir, "relu", b"x" * 1000))
        store.get_or_build(desc, SCENARIO, self.tmp / "b", lambda work_dir: self.fail("must hit"))
        stats = store.stats()
        self.assertEqual(stats["entries"], 1)
        self.assertGreater(stats["bundle_bytes"], 0)
        self.assertEqual(stats["raw_bytes"], 1000 + len((self.tmp / "a" / "relu.json").read_bytes()))
        self.assertEqual(stats["counters"]["hits"], 1)
        self.assertEqual(stats["counters"]["misses"], 1)
        self.assertEqual(stats["counters"]["stores"], 1)


class GetOrBuildTest(TempDirTestCase):
    def test_miss_builds_once_then_hits(self) -> None:
        store = self.store()
        calls = []

        def build(work_dir: Path) -> None:
            calls.append(work_dir)
            self.assertIsInstance(work_dir, Path)
            self.assertEqual(list(work_dir.iterdir()), [])
            write_kernel(work_dir, "matmul", b"\x00\x01binary")

        out = self.tmp / "kernel_meta"
        out.mkdir()
        (out / "unrelated.o").write_bytes(b"someone else's kernel")
        first = store.get_or_build(descriptor(), SCENARIO, out, build)
        self.assertEqual(first.source, "built")
        self.assertFalse(first.hit)
        self.assertEqual(first.key, store.key(descriptor(), SCENARIO))
        self.assertEqual([path.name for path in first.files], ["matmul.json", "matmul.o"])
        self.assertEqual(len(calls), 1)
        self.assertTrue(store.has(first.key))
        self.assertEqual((out / "matmul.o").read_bytes(), b"\x00\x01binary")
        # No staging or work directories are left behind.
        self.assertEqual(sorted(path.name for path in out.iterdir()), ["matmul.json", "matmul.o", "unrelated.o"])

        out2 = self.tmp / "other_meta"
        second = store.get_or_build(descriptor(), SCENARIO, out2, build)
        self.assertEqual(second.source, "hit")
        self.assertTrue(second.hit)
        self.assertEqual(second.build_ms, 0)
        self.assertEqual(len(calls), 1)
        self.assertEqual(second.files, [out2 / "matmul.json", out2 / "matmul.o"])
        self.assertEqual((out2 / "matmul.o").read_bytes(), b"\x00\x01binary")

    def test_signing_key_signs_what_get_or_build_stores(self) -> None:
        if not CLI.exists():
            self.skipTest(f"opcache CLI not found at {CLI} (set OPCACHE_CLI)")
        key_file = self.tmp / "ci.pem"
        made = subprocess.run(
            [str(CLI), "trust", "keygen", "ci", "--out", str(key_file)], capture_output=True, text=True, timeout=30
        )
        self.assertEqual(made.returncode, 0, made.stderr)
        trusted = self.tmp / "trusted.keys"
        trusted.write_text(made.stdout)
        store = self.store(signing_key=str(key_file))
        result = store.get_or_build(descriptor(), SCENARIO, self.tmp / "out", lambda d: write_kernel(d, "k", b"x" * 64))
        self.assertEqual(result.source, "built")
        listed = subprocess.run(
            [str(CLI), "--cache-dir", str(self.cache_dir), "--trusted-keys", str(trusted), "--json", "ls"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        self.assertEqual(listed.returncode, 0, listed.stderr)
        entries = json.loads(listed.stdout)["entries"]
        self.assertEqual(len(entries), 1)
        self.assertEqual(len(entries[0]["signatures"]), 1)
        self.assertEqual(entries[0]["signatures"][0]["name"], "ci")
        self.assertEqual(made.stdout.strip(), "ci:" + entries[0]["signatures"][0]["public_key"])

    def test_untrusted_error_has_its_own_exception(self) -> None:
        self.assertIs(opcache.errors.from_status(opcache._lib.UNTRUSTED, "x").__class__, opcache.UntrustedError)

    def test_failing_build_reraises_and_stores_nothing(self) -> None:
        store = self.store()
        out = self.tmp / "out"

        def build(work_dir: Path) -> None:
            write_kernel(work_dir, "half", b"partial")
            raise ValueError("tiling failed for shape [16, 32]")

        # Not assertRaises: it drops the traceback this test wants to inspect.
        try:
            store.get_or_build(descriptor(), SCENARIO, out, build)
        except ValueError as caught:
            error = caught
        else:
            self.fail("the ValueError from build did not reach the caller")
        self.assertEqual(str(error), "tiling failed for shape [16, 32]")
        frames = [frame.name for frame in traceback.extract_tb(error.__traceback__)]
        self.assertIn("build", frames)  # the original traceback is kept
        if sys.version_info >= (3, 11):  # exception notes (PEP 678); the package supports 3.9
            self.assertTrue(any("nothing was stored" in note for note in getattr(error, "__notes__", [])))
        key = store.key(descriptor(), SCENARIO)
        self.assertFalse(store.has(key))
        self.assertEqual(list(out.iterdir()), [])
        # The next call builds again and succeeds.
        result = store.get_or_build(descriptor(), SCENARIO, out, lambda work_dir: write_kernel(work_dir, "ok", b"1"))
        self.assertEqual(result.source, "built")

    def test_build_calling_get_or_build_gets_its_own_callback(self) -> None:
        # Every call shares one C callback, which finds the call's build function
        # by the token passed as user_data: a nested call must not run the outer one.
        store = self.store()
        calls = []

        def inner(work_dir: Path) -> None:
            calls.append("inner")
            raise ValueError("inner tiling failed")

        def outer(work_dir: Path) -> None:
            calls.append("outer")
            with self.assertRaises(ValueError):
                store.get_or_build(descriptor("Add"), SCENARIO, self.tmp / "inner", inner)
            write_kernel(work_dir, "outer", b"o")

        result = store.get_or_build(descriptor(), SCENARIO, self.tmp / "out", outer)
        self.assertEqual(calls, ["outer", "inner"])
        self.assertEqual(result.source, "built")
        self.assertEqual([path.name for path in result.files], ["outer.json", "outer.o"])
        self.assertFalse(store.has(store.key(descriptor("Add"), SCENARIO)))

    def test_calls_leave_no_pending_build_behind(self) -> None:
        # The token table of the shared callback holds only calls in progress:
        # not after a hit, a build, a failed build, or a call on a closed Store.
        store = self.store()
        out = self.tmp / "out"
        store.get_or_build(descriptor(), SCENARIO, out, lambda work_dir: write_kernel(work_dir, "k", b"1"))
        store.get_or_build(descriptor(), SCENARIO, out, lambda d: self.fail("a hit builds nothing"))
        with self.assertRaises(ValueError):
            store.get_or_build(descriptor("Add"), SCENARIO, out, lambda d: int("x"))
        store.close()
        with self.assertRaises(opcache.UsageError):
            store.get_or_build(descriptor(), SCENARIO, out, lambda d: None)
        self.assertEqual(opcache.store._PENDING, {})

    def test_file_lists_decoded_from_many_threads_stay_bounded_without_errors(self) -> None:
        # Evicting the oldest file list while another thread inserts one must not
        # raise ("dictionary changed size during iteration") nor pass the bound.
        from opcache import store as store_module

        errors: list[str] = []
        previous = sys.getswitchinterval()
        sys.setswitchinterval(1e-6)  # switch threads as often as possible

        def parse(thread: int) -> None:
            try:
                for i in range(4000):
                    packed = f"/o/{thread}-{i}.json\0/o/{thread}-{i}.o\0".encode()
                    paths = store_module._file_list(packed)
                    if paths != (Path(f"/o/{thread}-{i}.json"), Path(f"/o/{thread}-{i}.o")):
                        errors.append(f"{packed!r} decoded as {paths}")
            except Exception as error:  # noqa: BLE001 - any error is the failure
                errors.append(repr(error))

        try:
            threads = [threading.Thread(target=parse, args=(t,)) for t in range(8)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        finally:
            sys.setswitchinterval(previous)
        self.assertEqual(errors, [])
        self.assertLessEqual(len(store_module._FILE_LISTS), store_module._FILE_LISTS_KEPT)

    def test_repeated_hits_return_equal_results_with_their_own_lists(self) -> None:
        # Reports already parsed are reused: each Result still gets its own list.
        store = self.store()
        out = self.tmp / "out"
        store.get_or_build(descriptor(), SCENARIO, out, lambda work_dir: write_kernel(work_dir, "k", b"1"))
        first = store.get_or_build(descriptor(), SCENARIO, out, lambda d: self.fail("a hit builds nothing"))
        second = store.get_or_build(descriptor(), SCENARIO, out, lambda d: self.fail("a hit builds nothing"))
        self.assertEqual(first, second)
        first.files.append(Path("/elsewhere"))
        self.assertEqual(second.files, [out / "k.json", out / "k.o"])
        third = store.get_or_build(descriptor(), SCENARIO, out, lambda d: self.fail("a hit builds nothing"))
        self.assertEqual(third.files, [out / "k.json", out / "k.o"])
        other = store.get_or_build(descriptor(), SCENARIO, self.tmp / "other", lambda d: self.fail("a hit"))
        self.assertEqual(other.files, [self.tmp / "other" / "k.json", self.tmp / "other" / "k.o"])

    def test_keyboard_interrupt_in_build_does_not_cross_c(self) -> None:
        store = self.store()

        def build(work_dir: Path) -> None:
            raise KeyboardInterrupt

        with self.assertRaises(KeyboardInterrupt):
            store.get_or_build(descriptor(), SCENARIO, self.tmp / "out", build)
        self.assertFalse(store.has(store.key(descriptor(), SCENARIO)))

    def test_build_writing_nothing_is_build_failed(self) -> None:
        store = self.store()
        with self.assertRaises(opcache.BuildFailedError) as caught:
            store.get_or_build(descriptor(), SCENARIO, self.tmp / "out", lambda work_dir: None)
        self.assertEqual(caught.exception.status, "build_failed")
        self.assertIn("no files", str(caught.exception))

    def test_hit_lists_files_by_name_and_out_dir_as_given(self) -> None:
        store = self.store()
        staged = self.tmp / "staged"
        staged.mkdir()
        for name in ("z.o", "a.json"):
            (staged / name).write_bytes(name.encode())
        store.put(descriptor(), SCENARIO, [staged / "z.o", staged / "a.json"])  # stored in this order
        out = str(self.tmp / "kernel_meta")  # a str: Result.out_dir is a Path all the same
        result = store.get_or_build(descriptor(), SCENARIO, out, lambda d: self.fail("a hit builds nothing"))
        self.assertEqual(result.source, "hit")
        self.assertEqual(result.files, [Path(out) / "a.json", Path(out) / "z.o"])
        self.assertEqual(result.out_dir, Path(out))
        self.assertIsInstance(result.out_dir, Path)

    def test_mode_disable_bypasses(self) -> None:
        store = self.store(mode="disable")
        calls = []

        def build(work_dir: Path) -> None:
            calls.append(1)
            write_kernel(work_dir, "k", b"bypass")

        for _ in range(2):
            result = store.get_or_build(descriptor(), SCENARIO, self.tmp / "out", build)
            self.assertEqual(result.source, "bypassed")
            self.assertEqual([path.name for path in result.files], ["k.json", "k.o"])
        self.assertEqual(len(calls), 2)
        self.assertFalse(store.has(result.key))

    def test_op_debug_list_bypasses_listed_ops_only(self) -> None:
        store = self.store(op_debug_list=["Add", "Mul"])
        add = store.get_or_build(descriptor("Add"), SCENARIO, self.tmp / "a", lambda d: write_kernel(d, "add", b"1"))
        matmul = store.get_or_build(descriptor(), SCENARIO, self.tmp / "m", lambda d: write_kernel(d, "mm", b"2"))
        self.assertEqual(add.source, "bypassed")
        self.assertEqual(matmul.source, "built")

    def test_single_flight_across_processes(self) -> None:
        counter = self.tmp / "builds.log"
        out_root = self.tmp / "out"
        context = multiprocessing.get_context("spawn")
        with context.Pool(4) as pool:
            results = pool.starmap(
                _mp_worker, [(str(self.cache_dir), str(out_root), str(counter), worker) for worker in range(4)]
            )
        builds = counter.read_text().split()
        self.assertEqual(sorted(builds, key=int), [str(i) for i in range(10)], "each key must be built exactly once")
        for i in range(10):
            sources = sorted(source for outcomes in results for key, source, _ in outcomes if key == i)
            self.assertEqual(sources, ["built", "hit", "hit", "hit"], f"key {i}")
        for worker, outcomes in enumerate(results):
            for i, _, names in outcomes:
                self.assertEqual(names, [f"k{i}.json", f"k{i}.o"])
                data = (out_root / f"w{worker}" / f"k{i}.o").read_bytes()
                self.assertEqual(data, f"kernel {i}".encode() * 100)
        with opcache.Store(self.cache_dir) as store:
            self.assertEqual(store.stats()["entries"], 10)

    def test_single_flight_across_threads(self) -> None:
        store = self.store()
        calls = []
        lock = threading.Lock()
        results = []

        def build(work_dir: Path) -> None:
            with lock:
                calls.append(1)
            time.sleep(0.1)
            write_kernel(work_dir, "t", b"threads")

        def run(index: int) -> None:
            result = store.get_or_build(descriptor(), SCENARIO, self.tmp / f"out{index}", build)
            with lock:
                results.append(result.source)

        threads = [threading.Thread(target=run, args=(index,)) for index in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        self.assertEqual(len(calls), 1)
        self.assertEqual(sorted(results), ["built"] + ["hit"] * 5)


class DeclaredInputsTest(TempDirTestCase):
    """get_or_build(..., inputs=...): declared files and directories in the key."""

    def compiler(self, source: Path) -> tuple[list[str], Callable[[Path], None]]:
        """A build that compiles what `source` holds, and the list of what it compiled."""
        compiled: list[str] = []

        def build(work_dir: Path) -> None:
            compiled.append(source.read_text())
            (work_dir / "tiled.o").write_text("compiled from " + compiled[-1])

        return compiled, build

    def test_edited_header_is_a_miss_unchanged_a_hit(self) -> None:
        store = self.store()
        header = self.tmp / "src" / "tiling.h"
        header.parent.mkdir()
        header.write_text("#define TILE 16\n")
        compiled, build = self.compiler(header)
        first = store.get_or_build(descriptor(), SCENARIO, self.tmp / "o1", build, inputs=[header])
        self.assertEqual(first.source, "built")
        self.assertNotEqual(first.key, store.key(descriptor(), SCENARIO))
        again = store.get_or_build(descriptor(), SCENARIO, self.tmp / "o2", build, inputs=[str(header)])
        self.assertEqual((again.source, again.key), ("hit", first.key))
        self.assertEqual(compiled, ["#define TILE 16\n"])

        header.write_text("#define TILE 32\n")
        edited = store.get_or_build(descriptor(), SCENARIO, self.tmp / "o3", build, inputs=header)
        self.assertEqual(edited.source, "built")
        self.assertNotEqual(edited.key, first.key)
        self.assertEqual(compiled, ["#define TILE 16\n", "#define TILE 32\n"])
        self.assertEqual((self.tmp / "o3" / "tiled.o").read_text(), "compiled from #define TILE 32\n")

    def test_new_file_in_a_declared_directory_is_a_miss(self) -> None:
        store = self.store()
        include = self.tmp / "include"
        include.mkdir()
        (include / "tiling.h").write_text("#define TILE 16\n")
        compiled, build = self.compiler(include / "tiling.h")
        first = store.get_or_build(descriptor(), SCENARIO, self.tmp / "o1", build, inputs=[include])
        self.assertEqual(store.get_or_build(descriptor(), SCENARIO, self.tmp / "o2", build, inputs=[include]).source,
                         "hit")
        (include / "vector.h").write_text("#define LANES 8\n")
        added = store.get_or_build(descriptor(), SCENARIO, self.tmp / "o3", build, inputs=[include])
        self.assertEqual(added.source, "built")
        self.assertNotEqual(added.key, first.key)
        self.assertEqual(len(compiled), 2)

    def test_no_inputs_keys_as_before(self) -> None:
        store = self.store()
        for inputs in (None, []):
            result = store.get_or_build(descriptor(), SCENARIO, self.tmp / "o", lambda d: write_kernel(d, "k", b"1"),
                                        inputs=inputs)
            self.assertEqual(result.key, store.key(descriptor(), SCENARIO))

    def test_missing_input_is_usage_error_and_builds_nothing(self) -> None:
        store = self.store()
        missing = self.tmp / "missing.h"
        with self.assertRaises(opcache.UsageError) as caught:
            store.get_or_build(descriptor(), SCENARIO, self.tmp / "o", lambda d: self.fail("built"), inputs=[missing])
        self.assertIn(f'declared input "{missing}" does not exist', str(caught.exception))
        self.assertEqual(store.stats()["entries"], 0)

    def test_reserved_member_and_wrong_types_are_refused(self) -> None:
        store = self.store()
        header = self.tmp / "tiling.h"
        header.write_text("#define TILE 16\n")
        reserved = dict(descriptor(), declared_inputs=[])
        with self.assertRaises(opcache.UsageError) as caught:
            store.get_or_build(reserved, SCENARIO, self.tmp / "o", lambda d: self.fail("built"), inputs=[header])
        self.assertIn('"declared_inputs" is reserved', str(caught.exception))
        with self.assertRaises(TypeError):
            store.get_or_build(descriptor(), SCENARIO, self.tmp / "o", lambda d: self.fail("built"), inputs=[1])

    def test_failed_build_note_names_the_declared_inputs(self) -> None:
        store = self.store()
        header = self.tmp / "tiling.h"
        header.write_text("#define TILE 16\n")

        def build(work_dir: Path) -> None:
            raise ValueError("tiling failed")

        with self.assertRaises(ValueError) as caught:
            store.get_or_build(descriptor(), SCENARIO, self.tmp / "o", build, inputs=[header])
        if sys.version_info >= (3, 11):
            self.assertIn("opcache: the build with 1 declared input(s) failed; nothing was stored",
                          getattr(caught.exception, "__notes__", []))

    def test_module_level_get_or_build_takes_inputs(self) -> None:
        os.environ["OPCACHE_DIR"] = str(self.cache_dir)
        self.addCleanup(os.environ.pop, "OPCACHE_DIR", None)
        header = self.tmp / "tiling.h"
        header.write_text("#define TILE 16\n")
        compiled, build = self.compiler(header)
        first = opcache.get_or_build(descriptor(), SCENARIO, self.tmp / "o1", build, inputs=[header])
        self.addCleanup(opcache.default_store().close)
        second = opcache.get_or_build(descriptor(), SCENARIO, self.tmp / "o2", build, inputs=[header])
        self.assertEqual((first.source, second.source), ("built", "hit"))
        self.assertEqual(len(compiled), 1)


class StoreLifetimeTest(TempDirTestCase):
    def test_context_manager_closes(self) -> None:
        with opcache.Store(self.cache_dir) as store:
            key = store.key(descriptor(), SCENARIO)
            self.assertFalse(store.closed)
        self.assertTrue(store.closed)
        with self.assertRaises(opcache.UsageError) as caught:
            store.has(key)
        self.assertIn("closed", str(caught.exception))
        store.close()  # idempotent

    def test_close_from_inside_a_build_is_refused(self) -> None:
        store = self.store()

        def build(work_dir: Path) -> None:
            store.close()

        with self.assertRaises(opcache.UsageError):
            store.get_or_build(descriptor(), SCENARIO, self.tmp / "out", build)
        self.assertFalse(store.closed)

    def test_pickled_store_reopens_with_same_options(self) -> None:
        store = self.store(mode="disable", op_debug_level=0)
        copy = pickle.loads(pickle.dumps(store))
        self.addCleanup(copy.close)
        self.assertEqual(copy.options, store.options)
        self.assertEqual(copy.options["cache_dir"], str(self.cache_dir))
        result = copy.get_or_build(descriptor(), SCENARIO, self.tmp / "o", lambda d: write_kernel(d, "p", b"p"))
        self.assertEqual(result.source, "bypassed")

    def test_version(self) -> None:
        self.assertRegex(opcache.version(), r"^\d+\.\d+\.\d+")
        self.assertEqual(opcache.__version__, opcache.version())


class CachedDecoratorTest(TempDirTestCase):
    def test_decorated_compiler_builds_once(self) -> None:
        store = self.store()
        calls = []

        @store.cached(scenario=opcache.Scenario(**SCENARIO_DICT), out_dir=self.tmp / "kernel_meta")
        def compile_op(desc: dict, work_dir: Path, *, impl_mode: str = "high_performance") -> None:
            """Compiles one op."""
            calls.append((desc["op_type"], impl_mode))
            write_kernel(work_dir, desc["op_type"].lower(), impl_mode.encode())

        first = compile_op(descriptor("Add"), impl_mode="high_precision")
        second = compile_op(descriptor("Add"))
        other = compile_op(descriptor("Sub"))
        self.assertEqual((first.source, second.source, other.source), ("built", "hit", "built"))
        self.assertEqual(calls, [("Add", "high_precision"), ("Sub", "high_performance")])
        self.assertEqual((self.tmp / "kernel_meta" / "add.o").read_bytes(), b"high_precision")
        self.assertEqual(compile_op.key(descriptor("Add")), first.key)
        self.assertIs(compile_op.store(), store)
        self.assertEqual(compile_op.__name__, "compile_op")
        self.assertEqual(compile_op.__doc__, "Compiles one op.")

    def test_module_level_decorator_with_callables(self) -> None:
        store = self.store()

        @opcache.cached(
            scenario=lambda desc: dict(SCENARIO_DICT, phase=desc.get("phase", "train")),
            out_dir=lambda desc: self.tmp / "meta" / desc["op_type"],
            store=store,
        )
        def compile_op(desc: dict, work_dir: Path) -> None:
            write_kernel(work_dir, "kernel", desc["op_type"].encode())

        result = compile_op({"op_type": "Gelu", "phase": "infer"})
        self.assertEqual(result.out_dir, self.tmp / "meta" / "Gelu")
        self.assertEqual(result.key, store.key({"op_type": "Gelu", "phase": "infer"}, dict(SCENARIO_DICT, phase="infer")))
        self.assertEqual(compile_op({"op_type": "Gelu", "phase": "infer"}).source, "hit")

    def test_default_store_uses_opcache_dir(self) -> None:
        os.environ["OPCACHE_DIR"] = str(self.cache_dir)
        self.addCleanup(os.environ.pop, "OPCACHE_DIR", None)
        result = opcache.get_or_build(descriptor(), SCENARIO, self.tmp / "o", lambda d: write_kernel(d, "x", b"1"))
        self.addCleanup(opcache.default_store().close)
        self.assertEqual(result.source, "built")
        with opcache.Store(self.cache_dir) as store:
            self.assertTrue(store.has(result.key))


if __name__ == "__main__":
    unittest.main()


def _write_cann_install(root: Path, version: str) -> None:
    """A CANN toolkit install as detection reads it: each component's version.info."""
    for component in ("compiler", "opp", "runtime", "opp_kernel"):
        (root / component).mkdir(parents=True, exist_ok=True)
        (root / component / "version.info").write_text(f"Version={version}\ntimestamp=1\n")


class ResolvedScenarioTest(TempDirTestCase):
    def setUp(self) -> None:
        super().setUp()
        from opcache import store as store_module

        self.store_module = store_module
        store_module._RESOLVED.clear()
        self.saved_environment = {name: os.environ.get(name) for name in ("RANK_SIZE", "ASCEND_TOOLKIT_HOME", "HOME")}
        self.addCleanup(self.restore_environment)

    def restore_environment(self) -> None:
        for name, value in self.saved_environment.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value

    def count_parses(self) -> list[bytes]:
        """The scenario texts opcache_scenario_parse is called with from now on."""
        from opcache import _lib

        parses: list[bytes] = []
        original = _lib.lib.opcache_scenario_parse

        def counting(text, out, environment):  # type: ignore[no-untyped-def]
            parses.append(text)
            return original(text, out, environment)

        _lib.lib.opcache_scenario_parse = counting
        self.addCleanup(setattr, _lib.lib, "opcache_scenario_parse", original)
        return parses

    def test_a_scenario_text_that_decides_everything_is_resolved_once(self) -> None:
        store = self.store()
        parses = self.count_parses()
        out = self.tmp / "out"
        results = [store.get_or_build(descriptor(), scenario, out, lambda d: write_kernel(d, "k", b"1"))
                   for scenario in (SCENARIO, SCENARIO, SCENARIO, SCENARIO_DICT, SCENARIO_DICT)]
        self.assertEqual([result.source for result in results], ["built", "hit", "hit", "hit", "hit"])
        self.assertEqual({result.key for result in results}, {store.key(descriptor(), SCENARIO)})
        self.assertEqual(len(parses), 2)  # the spec string once, the dict's JSON once

    def test_a_device_from_the_environment_is_resolved_on_every_call(self) -> None:
        # No device: RANK_SIZE decides it, so the text alone must not be kept.
        store = self.store()
        spec = "phase=train,toolchain=8.0.RC2,soc=Ascend910B1"
        os.environ["RANK_SIZE"] = "1"
        single = store.get_or_build(descriptor(), spec, self.tmp / "a", lambda d: write_kernel(d, "k", b"1"))
        os.environ["RANK_SIZE"] = "8"
        multi = store.get_or_build(descriptor(), spec, self.tmp / "b", lambda d: write_kernel(d, "k", b"8"))
        self.assertEqual((single.source, multi.source), ("built", "built"))
        self.assertEqual(single.key, store.key(descriptor(), "device=single," + spec))
        self.assertEqual(multi.key, store.key(descriptor(), "device=multi," + spec))
        self.assertNotIn(spec, self.store_module._RESOLVED)
        self.assertTrue(opcache.ResolvedScenario(spec).from_environment)

    def test_a_detected_toolchain_follows_an_upgrade_unless_resolved_explicitly(self) -> None:
        install = self.tmp / "Ascend" / "ascend-toolkit" / "latest"
        _write_cann_install(install, "8.0.RC2")
        os.environ["ASCEND_TOOLKIT_HOME"] = str(install)
        os.environ["HOME"] = str(self.tmp / "home")
        store = self.store()
        spec = "device=single,phase=train,soc=Ascend910B1"  # toolchain detected
        before = opcache.ResolvedScenario(spec)
        self.assertTrue(before.from_environment)
        self.assertEqual(before.to_dict()["toolchain"], "8.0.RC2")
        first = store.get_or_build(descriptor(), spec, self.tmp / "a", lambda d: write_kernel(d, "k", b"rc2"))
        self.assertEqual(first.source, "built")
        self.assertEqual(first.key, store.key(descriptor(), before))
        _write_cann_install(install, "8.0.RC3.alpha001")  # an upgrade, in the same process
        upgraded = store.get_or_build(descriptor(), spec, self.tmp / "b", lambda d: write_kernel(d, "k", b"rc3"))
        self.assertEqual(upgraded.source, "built")  # not the 8.0.RC2 kernel
        self.assertNotEqual(upgraded.key, first.key)
        # A resolution the caller made keeps what it resolved to.
        kept = store.get_or_build(descriptor(), before, self.tmp / "c", lambda d: self.fail("a hit builds nothing"))
        self.assertEqual((kept.source, kept.key), ("hit", first.key))

    def test_resolved_scenario_is_accepted_wherever_a_scenario_is(self) -> None:
        store = self.store()
        resolved = opcache.ResolvedScenario(SCENARIO)
        self.assertFalse(resolved.from_environment)
        self.assertEqual(resolved.to_dict(), SCENARIO_DICT)
        self.assertEqual(resolved, opcache.ResolvedScenario(opcache.Scenario(**{
            "device_mode": "single", "phase": "train", "toolchain": "8.0.RC2", "soc": "Ascend910B1"})))
        self.assertEqual(pickle.loads(pickle.dumps(resolved)), resolved)
        self.assertEqual(store.key(descriptor(), resolved), store.key(descriptor(), SCENARIO))
        result = store.get_or_build(descriptor(), resolved, self.tmp / "out", lambda d: write_kernel(d, "k", b"1"))
        self.assertEqual(result.key, store.key(descriptor(), SCENARIO))
        self.assertEqual([path.name for path in result.files], ["k.json", "k.o"])
        with self.assertRaises(opcache.UsageError) as caught:
            opcache.ResolvedScenario("device=single,phase=sleep,toolchain=8.0.RC2,soc=Ascend910B1")
        self.assertIn("phase", str(caught.exception))
