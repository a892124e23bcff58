#!/usr/bin/env python3
"""Installs the build into a scratch DESTDIR and builds programs against it the way a user
would: with `pkg-config --cflags --libs tern` and nothing from the source tree.

  install_test.py --build-dir DIR --example engine/api/examples/echo.c --cxx-program hello.cpp
                  [--cc CC] [--cxx CXX] [--relay]

Checks, in order:
  - `meson install --destdir` puts libtern.so (with its soname links), libtern.a, the public
    headers and tern.pc in place, and with --relay (tern-relay is built) its sample
    configuration and its systemd unit;
  - the C example (the README's) and a C++ program, each linked against the shared library,
    run from a scratch directory and exchange their message over loopback;
  - both again linked statically (`pkg-config --static`, -static): no libtern.so needed;
  - the C++ program, which also includes tern/tern.h, reports tern.pc's version.
Prints one line per step; exits 0 when all pass, 1 otherwise, 2 on bad arguments, 77 (skip)
when a tool it needs is missing.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile


class Failed(Exception):
    pass


def run(cmd, **kw):
    """Runs cmd; returns its stdout, raising Failed with its output when it fails."""
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise Failed(f"`{' '.join(cmd)}` exited {r.returncode}:\n{r.stdout}{r.stderr}")
    return r.stdout


def find_one(root, name):
    hits = [os.path.join(d, name) for d, _, files in os.walk(root) if name in files]
    if len(hits) != 1:
        raise Failed(f"expected one {name} under {root}, found {hits}")
    return hits[0]


def needed(binary):
    """The DT_NEEDED libraries of an ELF file."""
    out = run(["readelf", "-d", binary])
    return [line.split("[", 1)[1].rstrip("]") for line in out.splitlines() if "(NEEDED)" in line]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir", required=True)
    parser.add_argument("--example", required=True, help="the C example to build")
    parser.add_argument("--cxx-program", required=True, help="the C++ program to build")
    parser.add_argument("--cc", default="cc")
    parser.add_argument("--cxx", default="c++")
    parser.add_argument("--relay", action="store_true", help="tern-relay is built: check its files")
    args = parser.parse_args()
    for tool in ("pkg-config", "readelf", args.cc, args.cxx):
        if shutil.which(tool) is None:
            # scripts/setup.sh installs all of them; a machine without them cannot run this.
            print(f"install_test: {tool} not found (scripts/setup.sh installs it); skipped")
            return 77

    # meson test points LD_LIBRARY_PATH at the build tree's libtern.so: the programs here must
    # find the installed one or nothing.
    os.environ.pop("LD_LIBRARY_PATH", None)
    destdir = tempfile.mkdtemp(prefix="tern-install-")
    work = tempfile.mkdtemp(prefix="tern-install-work-")
    try:
        steps(args, destdir, work)
    except Failed as e:
        print(f"FAIL {e}")
        return 1
    finally:
        shutil.rmtree(destdir, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
    print("install_test: all steps passed")
    return 0


def steps(args, destdir, work):
    # Already built: the test depends on every installed target. A rebuild here would race
    # with the build meson test itself runs.
    run(["meson", "install", "-C", args.build_dir, "--no-rebuild", "--quiet", "--destdir",
         destdir])

    pc = find_one(destdir, "tern.pc")
    libdir = os.path.dirname(os.path.dirname(pc))
    for name in ("libtern.so", "libtern.a"):
        if not os.path.exists(os.path.join(libdir, name)):
            raise Failed(f"{name} not installed next to tern.pc ({libdir})")
    soname = [f for f in os.listdir(libdir) if f.startswith("libtern.so.")]
    real = os.path.realpath(os.path.join(libdir, "libtern.so"))
    out = run(["readelf", "-d", real])
    if "Library soname: [libtern.so." not in out:
        raise Failed(f"{real} has no soname libtern.so.N")
    print(f"ok: libraries in {os.path.relpath(libdir, destdir)}: {sorted(soname)} and libtern.a")

    include = os.path.dirname(find_one(destdir, "tern.h"))
    headers = sorted(os.listdir(include))
    for h in ("tern.h", "host.hpp", "types.hpp", "packet.hpp", "endpoint.hpp"):
        if h not in headers:
            raise Failed(f"tern/{h} not installed ({headers})")
    print(f"ok: headers {headers}")

    if args.relay:
        share = os.path.dirname(find_one(destdir, "relay.toml"))
        if not os.path.exists(os.path.join(share, "filter.rules")):
            raise Failed("filter.rules not installed next to relay.toml")
        unit = find_one(destdir, "tern-relay.service")
        if not unit.endswith("lib/systemd/system/tern-relay.service"):
            raise Failed(f"the unit is not under lib/systemd/system: {unit}")
        text = open(unit).read()
        exec_start = next((l for l in text.splitlines() if l.startswith("ExecStart=")), "")
        relay = exec_start.split("=", 1)[1].split()[0] if exec_start else ""
        if not relay or not os.access(destdir + relay, os.X_OK):
            raise Failed(f"the unit's ExecStart names no installed tern-relay: {exec_start!r}")
        if "ExecReload=/bin/kill -HUP $MAINPID" not in text:
            raise Failed("the unit does not reload with SIGHUP")
        print(f"ok: {os.path.relpath(share, destdir)}/relay.toml, filter.rules; "
              f"{os.path.relpath(unit, destdir)} runs {relay}")

    # pkg-config sees only the DESTDIR: its own .pc files, the sysroot prefixed to its paths.
    env = dict(os.environ, PKG_CONFIG_PATH=os.path.dirname(pc), PKG_CONFIG_SYSROOT_DIR=destdir)
    env.pop("PKG_CONFIG_LIBDIR", None)

    def pkg(*flags):
        return run(["pkg-config", *flags, "tern"], env=env).split()

    version = run(["pkg-config", "--modversion", "tern"], env=env).strip()
    shared_flags = pkg("--cflags", "--libs")
    static_flags = pkg("--static", "--cflags", "--libs")
    builds = [
        ("c", [args.cc, "-std=c11", "-Wall", "-Wextra", "-Werror", args.example], "echo: hello, tern"),
        ("c++", [args.cxx, "-std=c++20", "-Wall", "-Wextra", "-Werror", args.cxx_program],
         "hello: hello from C++"),
    ]
    for lang, compile_cmd, expect in builds:
        exe = os.path.join(work, f"{lang}-shared")
        run(compile_cmd + ["-o", exe] + shared_flags, cwd=work)
        libs = needed(exe)
        if not any(l.startswith("libtern.so.") for l in libs):
            raise Failed(f"{lang}: the shared build does not load libtern.so.N: {libs}")
        out = run([exe], cwd=work, env=dict(os.environ, LD_LIBRARY_PATH=libdir), timeout=60)
        if expect not in out:
            raise Failed(f"{lang} (shared): expected {expect!r}, got:\n{out}")
        if lang == "c++" and f"hello: libtern {version}" not in out:
            raise Failed(f"tern_version() is not tern.pc's version {version}:\n{out}")
        print(f"ok: {lang} against libtern.so: {out.splitlines()[0]}")

        exe = os.path.join(work, f"{lang}-static")
        run(compile_cmd + ["-static", "-o", exe] + static_flags, cwd=work)
        if needed(exe):
            raise Failed(f"{lang}: the static build still loads {needed(exe)}")
        out = run([exe], cwd=work, timeout=60)
        if expect not in out:
            raise Failed(f"{lang} (static): expected {expect!r}, got:\n{out}")
        print(f"ok: {lang} against libtern.a, -static: {out.splitlines()[0]}")


if __name__ == "__main__":
    sys.exit(main())
