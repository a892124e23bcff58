#!/usr/bin/env python3
"""Fails when an #include goes against DESIGN §1's direction (apps -> api -> runtime ->
protocol; drivers implement the runtime's interface).

Every #include in engine/, drivers/ and apps/ is resolved by file name against the tree: a
quoted include first in the includer's own folder, then anywhere its path matches the end of a
file's path ("common/cli.hpp", "tern/host.hpp", "driver.hpp"). An include that names no file
of the tree is a system or standard library header and always allowed; one that matches files
in several folders is an error (the build could pick either). Each layer may then reach:

  engine/base      engine/base and tern/endpoint.hpp (the vocabulary type its peer table keys on)
  engine/protocol  engine/protocol, engine/base, the vocabulary headers
  engine/net       engine/net, engine/base, the vocabulary headers
  engine/filter    engine/filter, engine/base, the vocabulary headers
  engine/runtime   engine/runtime, protocol, net, filter, base, the vocabulary headers
  engine/shard     engine/shard, engine/runtime and what it may reach
  engine/api       all of engine/ (tern/*.hpp itself: the public headers only)
  drivers/*        drivers/, engine/runtime/driver.hpp, engine/runtime/spsc_ring.hpp (the DPDK
                   driver's software steering), engine/net, the vocabulary headers
  apps/*           apps/, drivers/, the public headers (engine/api/include/tern), the
                   documented runtime entry points engine/shard/shard.hpp and
                   engine/filter/filter.hpp, and engine/base (dependency-free building
                   blocks: the relay counts its drops with base's drop reasons)

so nothing under engine/ includes drivers/ or apps/. The vocabulary headers are
engine/api/include/tern/*.hpp except host.hpp. Apps also may not call rt::Shard::core() (the
shard's application functions and the public API cover what they do).

  check_layering.py [--root DIR]   # exit 0 when clean, 1 with one line per violation
"""
import argparse
import os
import re
import sys

SOURCE_EXT = (".hpp", ".h", ".cpp", ".cc", ".c")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
AREAS = ("engine", "drivers", "apps")

PUBLIC = "engine/api/include/tern/"
VOCAB = lambda p: p.startswith(PUBLIC) and p != PUBLIC + "host.hpp"
under = lambda *dirs: (lambda p: any(p.startswith(d + "/") for d in dirs))
exactly = lambda *files: (lambda p: p in files)

BASE = under("engine/base")
PROTOCOL = lambda p: under("engine/protocol")(p) or BASE(p) or VOCAB(p)
RUNTIME = lambda p: (under("engine/runtime", "engine/protocol", "engine/net", "engine/filter")(p)
                     or BASE(p) or VOCAB(p))

# (folder prefix, who may be included, what the rule says); the first prefix that matches wins.
RULES = [
    ("engine/base/", lambda p: BASE(p) or p == PUBLIC + "endpoint.hpp",
     "engine/base may include only engine/base and tern/endpoint.hpp"),
    ("engine/protocol/", PROTOCOL,
     "engine/protocol may include only protocol, base and the vocabulary headers"),
    ("engine/net/", lambda p: under("engine/net")(p) or BASE(p) or VOCAB(p),
     "engine/net may include only net, base and the vocabulary headers"),
    ("engine/filter/", lambda p: under("engine/filter")(p) or BASE(p) or VOCAB(p),
     "engine/filter may include only filter, base and the vocabulary headers"),
    ("engine/runtime/", RUNTIME,
     "engine/runtime may include only runtime, protocol, net, filter, base and vocabulary"),
    ("engine/shard/", lambda p: under("engine/shard")(p) or RUNTIME(p),
     "engine/shard may include only shard and what the runtime may"),
    (PUBLIC, lambda p: p.startswith(PUBLIC),
     "public headers (tern/*.hpp) may include only public headers"),
    ("engine/api/", under("engine"), "engine/api may include only engine/"),
    ("engine/", under("engine"), "nothing under engine/ includes drivers/ or apps/"),
    ("drivers/", lambda p: (under("drivers", "engine/net")(p) or VOCAB(p) or
                            p in ("engine/runtime/driver.hpp", "engine/runtime/spsc_ring.hpp")),
     "drivers may include drivers/, runtime's driver.hpp and spsc_ring.hpp, engine/net and "
     "the vocabulary headers"),
    ("apps/", lambda p: (under("apps", "drivers")(p) or p.startswith(PUBLIC) or BASE(p) or
                         p in ("engine/shard/shard.hpp", "engine/filter/filter.hpp")),
     "apps may include apps/, drivers/, tern/*.hpp, engine/base, engine/shard/shard.hpp and "
     "engine/filter/filter.hpp"),
]

SHARD_CORE = re.compile(r"\.core\(\)")


def tree_files(root):
    files = []
    for area in AREAS:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, area)):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            for name in sorted(filenames):
                if name.endswith(SOURCE_EXT):
                    files.append(os.path.relpath(os.path.join(dirpath, name), root))
    return files


def resolve(includer, kind, name, files, file_set):
    """The tree file an include names, None for a system header; raises on ambiguity."""
    if kind == '"':
        local = os.path.normpath(os.path.join(os.path.dirname(includer), name))
        if local in file_set:
            return local
    matches = [f for f in files if f == name or f.endswith("/" + name)]
    if not matches:
        return None
    if len(matches) > 1:
        raise LookupError("matches " + ", ".join(matches))
    return matches[0]


def check(root):
    files = tree_files(root)
    file_set = set(files)
    problems = []
    for path in files:
        rule = next((r for r in RULES if path.startswith(r[0])), None)
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as src:
            lines = src.read().splitlines()
        for number, line in enumerate(lines, 1):
            m = INCLUDE.match(line)
            if m:
                try:
                    target = resolve(path, m.group(1), m.group(2), files, file_set)
                except LookupError as e:
                    problems.append(f"{path}:{number}: #include {m.group(2)} is ambiguous: {e}")
                    continue
                if target is not None and rule is not None and not rule[1](target):
                    problems.append(f"{path}:{number}: #include {m.group(2)} -> {target}: "
                                    f"{rule[2]}")
            if path.startswith("apps/") and SHARD_CORE.search(line.split("//")[0]):
                problems.append(f"{path}:{number}: apps use rt::Shard's application functions "
                                "or the public API, not core()")
    return problems, len(files)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=os.path.join(os.path.dirname(__file__), "..", ".."))
    args = parser.parse_args()
    problems, count = check(os.path.normpath(args.root))
    for p in problems:
        print(p)
    if problems:
        print(f"layering: {len(problems)} violation(s) in {count} files")
        return 1
    print(f"layering: {count} files, every include points the way DESIGN §1 allows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
