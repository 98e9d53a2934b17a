#!/usr/bin/env python3
"""Tests of scripts/check_layers.py on small trees made here: the checker must
name the file and line of every include that breaks a rule, and pass a tree
that follows them."""
import os
import subprocess
import sys
import tempfile
import unittest

CHECKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "check_layers.py")


def write(root, relative, text):
    path = os.path.join(root, relative)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as out:
        out.write(text)


def run_checker(root):
    done = subprocess.run([sys.executable, CHECKER, root], capture_output=True, text=True, check=False)
    return done.returncode, done.stdout + done.stderr


class CheckLayersTest(unittest.TestCase):
    def setUp(self):
        self.directory = tempfile.TemporaryDirectory()
        self.root = self.directory.name
        write(self.root, "base/DEPS", "+base/\n-<curl/\n")
        write(self.root, "base/files.hpp", "#pragma once\n")
        write(self.root, "store/DEPS", "# the store\n+base/\n+store/\n")
        write(self.root, "store/index.hpp", '#pragma once\n#include "base/files.hpp"\n')
        write(self.root, "cli/DEPS", "+base/\n+cli/\n+store/index.hpp\n")
        write(self.root, "cli/main.cpp", '#include "store/index.hpp"\n#include <vector>\n')

    def tearDown(self):
        self.directory.cleanup()

    def test_a_tree_that_follows_its_rules_passes(self):
        status, output = run_checker(self.root)
        self.assertEqual(status, 0, output)
        self.assertIn("3 files checked, 0 include(s)", output)

    def test_an_upward_include_is_reported_with_file_and_line(self):
        write(self.root, "base/util.cpp", '#include "base/files.hpp"\n\n#include "store/index.hpp"\n')
        status, output = run_checker(self.root)
        self.assertEqual(status, 1, output)
        self.assertIn('base/util.cpp:3: #include "store/index.hpp" is not allowed by base/DEPS', output)

    def test_the_longest_rule_wins(self):
        write(self.root, "store/secret.hpp", "#pragma once\n")
        write(self.root, "cli/other.cpp", '#include "store/secret.hpp"\n')
        status, output = run_checker(self.root)
        self.assertEqual(status, 1, output)
        self.assertIn("cli/other.cpp:1:", output)
        self.assertNotIn("cli/main.cpp", output)

    def test_a_forbidden_library_header_is_reported(self):
        write(self.root, "base/net.cpp", "#include <curl/curl.h>\n")
        status, output = run_checker(self.root)
        self.assertEqual(status, 1, output)
        self.assertIn("base/net.cpp:1: #include <curl/curl.h> is forbidden here by base/DEPS", output)

    def test_a_subfolder_inherits_its_parents_rules(self):
        write(self.root, "store/sub/part.cpp", '#include "cli/main.hpp"\n')
        status, output = run_checker(self.root)
        self.assertEqual(status, 1, output)
        self.assertIn("store/sub/part.cpp:1:", output)
        self.assertIn("store/DEPS", output)

    def test_a_folder_without_rules_is_reported(self):
        write(self.root, "newfolder/x.cpp", "int x;\n")
        status, output = run_checker(self.root)
        self.assertEqual(status, 1, output)
        self.assertIn("newfolder/x.cpp:1: no DEPS file", output)

    def test_an_include_of_a_missing_file_is_reported(self):
        write(self.root, "store/typo.cpp", '#include "base/flies.hpp"\n')
        status, output = run_checker(self.root)
        self.assertEqual(status, 1, output)
        self.assertIn('store/typo.cpp:1: #include "base/flies.hpp" names no file', output)

    def test_tests_and_benchmarks_are_not_checked(self):
        write(self.root, "tests/t.cpp", '#include "store/index.hpp"\n#include "cli/x.hpp"\n')
        write(self.root, "bench/b.cpp", '#include "cli/x.hpp"\n')
        status, output = run_checker(self.root)
        self.assertEqual(status, 0, output)

    def test_a_malformed_deps_file_is_a_usage_error(self):
        write(self.root, "store/DEPS", "base/\n")
        status, output = run_checker(self.root)
        self.assertEqual(status, 2, output)
        self.assertIn("store/DEPS:1: expected '+PREFIX' or '-PREFIX'", output)


if __name__ == "__main__":
    unittest.main()
