#!/usr/bin/env python3
"""docs/architecture.md "How to add", checked where a forgotten place would
not fail the build: a command (`opcache NAME`) and the section itself.

A command touches: its registrar `register_<family>_command(s)`, declared in
cli/context.hpp (the compiler names a missing declaration where the table
uses it) and defined in its own cli/cmd_<family>.cpp; one row in
command_families() of cli/command_table.cpp (serve's program:
cli/serve_main.cpp) naming every command the registrar adds; and its line in
docs/cli.md. Without the row the command would be registered by no process,
and with a name missing from the row it would only be found by registering
every family; neither fails to compile, so this test names them.
(The routes, settings, remote kinds and layouts are checked through the
product itself: tests/architecture/test_how_to_add.cpp.)

    tests/architecture/test_how_to_add.py [SOURCE_DIR]
"""
import os
import re
import sys
import unittest

SOURCE_DIR = os.path.realpath(sys.argv.pop(1) if len(sys.argv) > 1 and not sys.argv[1].startswith("-")
                              else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

# Commands docs/cli.md does not describe yet. Each one is a known gap: the test
# fails when a new command joins them, and when one of them is documented
# (then remove it from here).
UNDOCUMENTED_COMMANDS = set()

# `RegisterCommands register_key_command;` (the function type of cli/context.hpp), or the signature spelled out.
REGISTRAR_DECLARATION = re.compile(r"^(?:RegisterCommands|std::vector<Command>)\s+(register_\w+)\s*[;(]", re.MULTILINE)
REGISTRAR_DEFINITION = re.compile(r"^std::vector<Command>\s+(register_\w+)\s*\([^;{]*\)\s*\{", re.MULTILINE)
TOP_LEVEL_COMMAND = re.compile(r"\bapp\.add_subcommand\(\s*\"([^\"]+)\"")
TABLE_ROW = re.compile(r"\{\{([^{}]*)\},\s*(?:opcache::cli::)?(register_\w+)")
QUOTED = re.compile(r"\"([^\"]+)\"")


def read(relative):
    with open(os.path.join(SOURCE_DIR, relative), encoding="utf-8") as file:
        return file.read()


def table_rows(relative):
    """{registrar: [command names]} of the rows of a command table."""
    rows = {}
    for names, registrar in TABLE_ROW.findall(read(relative)):
        rows.setdefault(registrar, []).extend(QUOTED.findall(names))
    return rows


def command_files():
    return sorted(name for name in os.listdir(os.path.join(SOURCE_DIR, "cli"))
                  if name.startswith("cmd_") and name.endswith(".cpp"))


def section(text, heading):
    """The lines of `text` from `heading` to the next heading of its level or above."""
    level = heading.split(" ")[0]
    start = text.index("\n" + heading + "\n") + 1
    ends = [at for at in (text.find("\n" + "#" * n + " ", start) for n in range(1, len(level) + 1)) if at >= 0]
    return text[start:min(ends) if ends else len(text)]


class HowToAddACommandTest(unittest.TestCase):
    def setUp(self):
        self.declared = REGISTRAR_DECLARATION.findall(read("cli/context.hpp"))
        self.rows = table_rows("cli/command_table.cpp")
        self.serve_rows = table_rows("cli/serve_main.cpp")
        self.definitions = {}  # registrar -> the cmd_*.cpp defining it
        for name in command_files():
            for registrar in REGISTRAR_DEFINITION.findall(read("cli/" + name)):
                self.definitions.setdefault(registrar, []).append("cli/" + name)

    def test_the_tables_are_read(self):
        # Guards the patterns above: a reformatted table must not pass as empty.
        self.assertGreaterEqual(len(self.declared), 10)
        self.assertGreaterEqual(len(self.rows), 10)
        self.assertIn("register_serve_command", self.serve_rows)

    def test_every_cmd_file_defines_one_registrar_declared_in_cli_context_hpp(self):
        for name in command_files():
            defined = REGISTRAR_DEFINITION.findall(read("cli/" + name))
            self.assertEqual(len(defined), 1, f"cli/{name} defines {len(defined)} register_* functions; a command "
                                              f"family is one cli/cmd_<family>.cpp with one registrar")
            self.assertIn(defined[0], self.declared, f"cli/{name}: {defined[0]} is not declared in cli/context.hpp")

    def test_every_registrar_has_one_file_and_a_row_in_the_command_table(self):
        for registrar in self.declared:
            self.assertEqual(len(self.definitions.get(registrar, [])), 1,
                             f"{registrar} (cli/context.hpp) is defined in {self.definitions.get(registrar, [])}, "
                             f"not in exactly one cli/cmd_*.cpp")
            self.assertTrue(registrar in self.rows or registrar in self.serve_rows,
                            f"{registrar} ({self.definitions[registrar][0]}) has no row in command_families() of "
                            f"cli/command_table.cpp: no process would register its commands")

    def test_every_row_names_exactly_the_commands_its_registrar_adds(self):
        for table, rows in (("cli/command_table.cpp", self.rows), ("cli/serve_main.cpp", self.serve_rows)):
            for registrar, names in rows.items():
                self.assertIn(registrar, self.definitions, f"{table}: {registrar} is defined in no cli/cmd_*.cpp")
                source = self.definitions[registrar][0]
                added = TOP_LEVEL_COMMAND.findall(read(source))
                self.assertEqual(sorted(names), sorted(added),
                                 f"{table}: the row of {registrar} names {names}, but {source} adds {added}: "
                                 f"a command missing from the row is found only by registering every family")

    def test_docs_cli_md_describes_every_command(self):
        docs = read("docs/cli.md")
        commands = section(docs, "## Commands")
        names = sorted({name for row in self.rows.values() for name in row})
        for name in names:
            documented = (f"| `{name}" in commands or f"/ `{name}" in commands or f"`opcache {name}" in docs)
            if name in UNDOCUMENTED_COMMANDS:
                self.assertFalse(documented, f"docs/cli.md now describes `{name}`: remove it from "
                                             f"UNDOCUMENTED_COMMANDS in {os.path.relpath(__file__, SOURCE_DIR)}")
            else:
                self.assertTrue(documented, f"docs/cli.md does not describe `opcache {name}`: a row in its "
                                            f"\"Commands\" table (`| `{name} …`) or a section `opcache {name}`")
        self.assertLessEqual(UNDOCUMENTED_COMMANDS, set(names), "UNDOCUMENTED_COMMANDS names a command that is gone")


class HowToAddSectionTest(unittest.TestCase):
    def test_every_file_the_section_names_exists(self):
        text = section(read("docs/architecture.md"), "## How to add")
        named = set(re.findall(r"`((?:[a-z_]+/)+[A-Za-z0-9_.-]+\.(?:cpp|hpp|h|md|py|sh|json|cmake|txt))`", text))
        self.assertGreaterEqual(len(named), 10, "the section names too few files: is it still there?")
        for path in sorted(named):
            self.assertTrue(os.path.isfile(os.path.join(SOURCE_DIR, path)),
                            f"docs/architecture.md \"How to add\" names `{path}`, which does not exist")
        # `remote/<kind>_remote.cpp`, `cli/cmd_<family>.{hpp,cpp}`: each spelling must match a file.
        for placeholder in sorted(set(re.findall(r"`((?:[a-z_]+/)+[^`/]*<[^`]*)`", text))):
            braces = re.search(r"\{([^}]*)\}", placeholder)
            spellings = ([placeholder[:braces.start()] + choice + placeholder[braces.end():]
                          for choice in braces.group(1).split(",")] if braces else [placeholder])
            for spelling in spellings:
                pattern = re.sub(r"<[^>]*>", "[a-z0-9_]+", re.escape(spelling).replace(r"\<", "<").replace(r"\>", ">"))
                folder = os.path.join(SOURCE_DIR, spelling.split("<")[0].rsplit("/", 1)[0])
                matches = [name for name in (os.listdir(folder) if os.path.isdir(folder) else []) if
                           re.fullmatch(pattern, os.path.relpath(os.path.join(folder, name), SOURCE_DIR))]
                self.assertTrue(matches, f"docs/architecture.md \"How to add\" names `{placeholder}`, but no "
                                         f"file of the tree is spelled `{spelling}`")

if __name__ == "__main__":
    unittest.main(verbosity=2)
