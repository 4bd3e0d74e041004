#!/usr/bin/env python3
"""clang-tidy over translation units, each skipped when a run already found it clean.

A unit's verdict is a function of what clang-tidy reads: the tool (its version), its configuration
(every .clang-tidy in the tree and the arguments below), the unit's compile flags, and the text of
the unit with everything it includes. The key hashes exactly those: the flags, the unit's
preprocessed text (clang's own preprocessor on the unit's own command line, so macros, include
resolution and predefined macros all count), and the raw bytes of every file the preprocessor
opened (comments are gone from the preprocessed text, and NOLINT lives in comments). The checkout's
path is replaced by a placeholder before hashing, so clones at different paths share the cache;
nothing clang-tidy decides depends on where the checkout is (HeaderFilterRegex names directories
inside it). A clean unit's key is stored; a unit with findings is never stored, so it is checked
again on every run until it is clean.

The trees are unity builds: CMake compiles a target's sources in batches (unity_N_cxx.cxx, each
including up to 16 sources by absolute path) and lists only the batches in compile_commands.json.
clang-tidy checks the same batches, one parse each instead of one per source (on the 2-core CI
machine a cold check of every source on its own took longer than both builds together). A batch is
checked as one file, the sources' text one after another, each after a #line naming it: everything
is in the main file, so the path-sensitive analyzer looks at every function (it skips functions
outside the main file, so a batch of #includes would leave it nothing), the NOLINT comments are
where they were, and every finding names the source's own path and line. Each source's own
directory is given with -iquote, as the compiler searches it for the source's "quoted" includes.
A batch's unit file and the database clang-tidy is given are written to BUILD/tidy/. Sources that
CMake leaves out of batches (those with flags of their own) are checked alone.

Usage: tidy_cache.py --source DIR --cache DIR -p BUILD [-p BUILD ...] [-j N] FILE...
Each FILE is checked, with its batch, in the first build directory whose compile_commands.json
has it.
"""

import argparse
import concurrent.futures
import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
import threading
import time

TIDY_ARGS = ["--quiet"]
# Every unit gets every check (scripts/lint.sh gives the units of what ships and the fuzz targets).
# The analyzer runs deep (its default: callees inlined into each path) on a unit whose own sources
# or private headers call a C library that hands out memory and handles (libvirt's strings and
# objects, libpci's, hwloc's, sd-bus's, OpenSSL's, ...), where its leak, double-free,
# use-after-free and null checks find what the compiler cannot; on the rest (code over the
# project's own typed interfaces and RAII wrappers) in its shallow mode, which inlines less: on
# api/rest's batch 17.7 s of analysis against 71.4 s, with the same findings. A cold run's
# clang-tidy was the part of CI that outlasted everything else on 2 cores.
RAW_API_INCLUDE = re.compile(
    r"^#include <(libvirt/|pci/|hwloc|systemd/|libnvme|nvme/|netlink/|infiniband/|openssl/|libisofs/|dlfcn\.h)",
    re.MULTILINE)
PRIVATE_INCLUDE = re.compile(r'^#include "([^"]+)"', re.MULTILINE)
SHALLOW_ARGS = ["--extra-arg=-Xclang", "--extra-arg=-analyzer-config", "--extra-arg=-Xclang",
                "--extra-arg=mode=shallow"]
LINE_MARKER = re.compile(rb'^# \d+ "((?:[^"\\]|\\.)*)"', re.MULTILINE)
UNITY_SOURCE = re.compile(r"/CMakeFiles/[^/]+\.dir/Unity/unity_\d+_(?:cxx|c)\.(?:cxx|c)$")
UNITY_INCLUDE = re.compile(r'^#include "([^"]+)"$', re.MULTILINE)
# Arguments that name outputs: they change nothing clang-tidy or the preprocessor decides.
OUTPUT_ARGS_WITH_VALUE = ("-o", "-MF", "-MT", "-MQ")
OUTPUT_ARGS = ("-c", "-MD", "-MMD")


class FileHashes:
    """sha256 of each file's bytes with the checkout's path replaced, read once per run. The batch
    files name their sources by absolute path (#line, -iquote): hashed as they are, every batch had
    another key in each clone, and CI's fresh clone found nothing in the cache."""

    def __init__(self, source):
        self._source = source.encode()
        self._lock = threading.Lock()
        self._hashes = {}

    def get(self, path):
        with self._lock:
            if path in self._hashes:
                return self._hashes[path]
        try:
            with open(path, "rb") as f:
                digest = hashlib.sha256(f.read().replace(self._source, b"@SOURCE@")).hexdigest()
        except OSError:
            digest = "unreadable"
        with self._lock:
            self._hashes[path] = digest
        return digest


def unity_members(entry):
    """The sources a CMake unity batch includes, in its order; [] for an ordinary unit."""
    file = os.path.normpath(os.path.join(entry["directory"], entry["file"]))
    if not UNITY_SOURCE.search(file):
        return []
    with open(file) as f:
        return UNITY_INCLUDE.findall(f.read())


def write_atomically(path, text):
    """path holds text, or what it held before: never half of it (a run killed halfway)."""
    with open(path + ".partial", "w") as f:
        f.write(text)
    os.replace(path + ".partial", path)


def write_if_changed(path, text):
    """As write_atomically, leaving an unchanged file's mtime alone."""
    try:
        with open(path) as f:
            if f.read() == text:
                return
    except OSError:
        pass
    write_atomically(path, text)


def batch_unit(entry, members, units_dir):
    """The batch as one file (each source after a #line naming it), its compile entry, and where
    each source starts in it: (the batch's line of the source's first line, the source)."""
    batch = entry["file"]
    name = os.path.relpath(os.path.normpath(os.path.join(entry["directory"], batch)), entry["directory"])
    path = os.path.join(units_dir, name.replace("/CMakeFiles/", "/").replace("/Unity/", "/").replace("/", "-")
                        .replace(".cxx", ".cpp"))
    text = []
    starts = []
    line = 1
    for member in members:
        with open(member) as f:
            body = f.read()
        starts.append((line + 1, member))
        text.append(f'#line 1 "{member}"\n{body}\n')
        line += 2 + body.count("\n")
    write_if_changed(path, "".join(text))
    args = arguments_of(entry)
    quote_dirs = [arg for d in dict.fromkeys(os.path.dirname(m) for m in members) for arg in ("-iquote", d)]
    args = [args[0], *quote_dirs, *[path if arg == batch else arg for arg in args[1:]]]
    return {"directory": entry["directory"], "file": path, "arguments": args}, starts


BATCH_LOCATION = re.compile(r"^(/[^:\s]+/tidy/units/[^:\s]+):(\d+):", re.MULTILINE)


def source_locations(output, batch, starts):
    """clang-tidy's output with each batch:line replaced by the source's own file:line: clang-tidy
    names the file it read, not the one a #line names."""
    def replace(match):
        line = int(match.group(2))
        if match.group(1) != batch or not starts or line < starts[0][0]:
            return match.group(0)
        first, member = max((s for s in starts if s[0] <= line), key=lambda s: s[0])
        return f"{member}:{line - first + 1}:"
    return BATCH_LOCATION.sub(replace, output)


def load_databases(build_dirs):
    """The units to check: (units' database dir, entry, the sources it holds, where each starts in a
    batch), and for each source its unit; the first database that has a source wins. Each tree's
    units (a file per batch) and their database are written to BUILD/tidy/."""
    units = []
    unit_of = {}
    for build in build_dirs:
        path = os.path.join(build, "compile_commands.json")
        if not os.path.exists(path):
            continue
        database = os.path.join(build, "tidy")
        os.makedirs(os.path.join(database, "units"), exist_ok=True)
        entries = []
        with open(path) as f:
            for entry in json.load(f):
                members = unity_members(entry)
                starts = []
                if members:
                    entry, starts = batch_unit(entry, members, os.path.join(database, "units"))
                else:
                    members = [os.path.normpath(os.path.join(entry["directory"], entry["file"]))]
                entries.append(entry)
                if all(m in unit_of for m in members):
                    continue  # an earlier unit checks these sources (a tree's, or the other tree's)
                units.append((database, entry, members, starts))
                for member in members:
                    unit_of.setdefault(member, len(units) - 1)
        write_if_changed(os.path.join(database, "compile_commands.json"), json.dumps(entries, indent=1))
    return units, unit_of


def arguments_of(entry):
    args = entry.get("arguments") or shlex.split(entry["command"])
    if os.path.basename(args[0]) == "ccache":
        args = args[1:]
    return args


def without_outputs(args):
    """The command line less the compiler and the arguments that only name outputs."""
    out = []
    skip_next = False
    for arg in args[1:]:
        if skip_next:
            skip_next = False
            continue
        if arg in OUTPUT_ARGS_WITH_VALUE:
            skip_next = True
            continue
        if arg in OUTPUT_ARGS or arg.startswith("-o"):
            continue
        out.append(arg)
    return out


def preprocessor_command(args):
    """The unit's own command line turned into clang's preprocessor writing to stdout."""
    return ["clang++", *without_outputs(args), "-E", "-o", "-"]


def calls_raw_api(members):
    """Whether a source, or a header beside it that it includes, includes the interface of a C
    library that hands out memory or handles (RAW_API_INCLUDE)."""
    for member in members:
        with open(member) as f:
            text = f.read()
        for header in PRIVATE_INCLUDE.findall(text):
            beside = os.path.join(os.path.dirname(member), header)
            if os.path.isfile(beside):
                with open(beside) as f:
                    text += f.read()
        if RAW_API_INCLUDE.search(text):
            return True
    return False


def checks_of(members):
    """The arguments clang-tidy gets for a unit beyond TIDY_ARGS."""
    return [] if calls_raw_api(members) else SHALLOW_ARGS


def key_of(entry, extra, source, context, hashes):
    args = arguments_of(entry)
    run = subprocess.run(preprocessor_command(args), cwd=entry["directory"], capture_output=True)
    if run.returncode != 0:
        return None, run.stderr.decode(errors="replace")
    text = run.stdout
    h = hashlib.sha256()
    h.update(context)
    h.update(" ".join(extra).encode() + b"\0")
    h.update(" ".join(without_outputs(args)).replace(source, "@SOURCE@").encode())
    h.update(b"\0")
    h.update(text.replace(source.encode(), b"@SOURCE@"))
    opened_files = []
    for opened in set(LINE_MARKER.findall(text)):
        path = opened.decode(errors="replace").replace("\\\\", "\\")
        if path.startswith("<"):
            continue
        full = os.path.normpath(os.path.join(entry["directory"], path))
        opened_files.append((full.replace(source, "@SOURCE@"), hashes.get(full)))
    # Sorted once the checkout's path is replaced: sorted before, /work/... and /tmp/... sort on
    # either side of /usr/..., and the same unit had another key in each clone.
    for path, digest in sorted(opened_files):
        h.update(path.encode() + b"\0" + digest.encode())
    return h.hexdigest(), None


def tidy(file, build, extra, starts):
    run = subprocess.run(["clang-tidy", "-p", build, *TIDY_ARGS, *extra, file], capture_output=True)
    output = source_locations((run.stdout + run.stderr).decode(errors="replace"), file, starts)
    findings = [line for line in output.splitlines() if "warning:" in line or "error:" in line]
    return run.returncode == 0 and not findings, output


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--source", required=True)
    parser.add_argument("--cache", required=True)
    parser.add_argument("-p", dest="builds", action="append", required=True)
    parser.add_argument("-j", dest="jobs", type=int, default=os.cpu_count())
    parser.add_argument("--log", default=None)
    parser.add_argument("files", nargs="+")
    options = parser.parse_args()
    source = os.path.realpath(options.source)
    os.makedirs(options.cache, exist_ok=True)

    version = subprocess.run(["clang-tidy", "--version"], capture_output=True, check=True).stdout
    configs = sorted(
        os.path.join(d, f) for d, _, fs in os.walk(source) if "/build" not in d for f in fs if f == ".clang-tidy"
    )
    # A batch is one file under BUILD/tidy/, so clang-tidy finds the top-level .clang-tidy for it,
    # never one beside a source: refuse a tree that has such a file rather than ignore it.
    if configs != [os.path.join(source, ".clang-tidy")]:
        print("clang-tidy: batches honour only the top-level .clang-tidy; found " +
              ", ".join(os.path.relpath(c, source) for c in configs), file=sys.stderr)
        return 1
    context = hashlib.sha256(version)
    context.update(" ".join(TIDY_ARGS).encode())
    for config in configs:
        with open(config, "rb") as f:
            context.update(config.replace(source, "@SOURCE@").encode() + b"\0" + f.read())
    context = context.digest()

    units, unit_of = load_databases([os.path.realpath(b) for b in options.builds])
    hashes = FileHashes(source)
    files = [os.path.realpath(f) for f in options.files]
    missing = [f for f in files if f not in unit_of]
    if missing:
        for f in missing:
            print(f"clang-tidy: {os.path.relpath(f, source)} is in no compile database ({', '.join(options.builds)}): "
                  "no tree builds it", file=sys.stderr)
        return 1
    # The costliest first (the deep analyzer's, then by the sources' size), so that the last units
    # to finish on a machine with few cores are small ones: a cold run's tail is the tidy's.
    def cost(index):
        members = units[index][2]
        return (not checks_of(members), sum(os.path.getsize(m) for m in members))
    wanted = sorted({unit_of[f] for f in files}, key=cost, reverse=True)

    def check(index):
        database, entry, members, starts = units[index]
        extra = checks_of(members)
        key, why = key_of(entry, extra, source, context, hashes)
        stamp = os.path.join(options.cache, key[:2], key) if key else None
        if stamp and os.path.exists(stamp):
            return members, "cached", "", 0.0
        start = time.monotonic()
        clean, output = tidy(entry["file"], database, extra, starts)
        seconds = time.monotonic() - start
        if not clean:
            return members, "findings", (why or "") + output, seconds
        if stamp:
            os.makedirs(os.path.dirname(stamp), exist_ok=True)
            write_atomically(stamp, "\n".join(os.path.relpath(m, source) for m in members) + "\n")
        return members, "checked", "", seconds

    counts = {"cached": 0, "checked": 0, "findings": 0}
    failures = []
    seconds = {}
    sources = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, options.jobs)) as pool:
        for members, verdict, output, spent in pool.map(check, wanted):
            counts[verdict] += 1
            sources += len(members)
            name = os.path.relpath(members[0], source) + (f" (+{len(members) - 1})" if len(members) > 1 else "")
            if verdict != "cached":
                seconds[name] = spent
            if verdict == "findings":
                failures.append((name, output))
    log = open(options.log, "w") if options.log else None
    for name, output in failures:
        if log:
            log.write(f"=== {name}\n{output}\n")
        for line in output.splitlines():
            if "warning:" in line or "error:" in line:
                print(line)
    if log:
        log.close()
    print(f"clang-tidy: {sources} sources in {len(wanted)} units: {counts['cached']} clean in the cache, "
          f"{counts['checked']} checked clean now, {counts['findings']} with findings")
    if seconds:
        slowest = sorted(seconds.items(), key=lambda item: -item[1])[:5]
        print(f"clang-tidy: {sum(seconds.values()):.0f} s of clang-tidy for the {len(seconds)} checked; slowest: " +
              ", ".join(f"{name} {spent:.1f} s" for name, spent in slowest))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
