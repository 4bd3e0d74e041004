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

Usage: tidy_cache.py --source DIR --cache DIR -p BUILD [-p BUILD ...] [-j N] FILE...
Each FILE is checked with the first build directory whose compile_commands.json has it.
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

TIDY_ARGS = ["--quiet"]
LINE_MARKER = re.compile(rb'^# \d+ "((?:[^"\\]|\\.)*)"', re.MULTILINE)


class FileHashes:
    """sha256 of each file's bytes, read once per run."""

    def __init__(self):
        self._lock = threading.Lock()
        self._hashes = {}

    def get(self, path):
        with self._lock:
            if path in self._hashes:
                return self._hashes[path]
        try:
            with open(path, "rb") as f:
                digest = hashlib.sha256(f.read()).hexdigest()
        except OSError:
            digest = "unreadable"
        with self._lock:
            self._hashes[path] = digest
        return digest


def load_databases(build_dirs):
    """file path -> (build dir, compile command entry), the first database that has it winning."""
    units = {}
    for build in build_dirs:
        path = os.path.join(build, "compile_commands.json")
        if not os.path.exists(path):
            continue
        with open(path) as f:
            for entry in json.load(f):
                file = os.path.normpath(os.path.join(entry["directory"], entry["file"]))
                units.setdefault(file, (build, entry))
    return units


def arguments_of(entry):
    args = entry.get("arguments") or shlex.split(entry["command"])
    if os.path.basename(args[0]) == "ccache":
        args = args[1:]
    return args


def preprocessor_command(args):
    """The unit's own command line turned into clang's preprocessor writing to stdout."""
    out = ["clang++"]
    skip_next = False
    for arg in args[1:]:
        if skip_next:
            skip_next = False
            continue
        if arg in ("-o", "-MF", "-MT", "-MQ"):
            skip_next = True
            continue
        if arg in ("-c", "-MD", "-MMD") or arg.startswith("-o"):
            continue
        out.append(arg)
    return out + ["-E", "-o", "-"]


def key_of(entry, source, context, hashes):
    args = arguments_of(entry)
    run = subprocess.run(preprocessor_command(args), cwd=entry["directory"], capture_output=True)
    if run.returncode != 0:
        return None, run.stderr.decode(errors="replace")
    text = run.stdout
    h = hashlib.sha256()
    h.update(context)
    h.update(" ".join(args).replace(source, "@SOURCE@").encode())
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


def tidy(file, build):
    run = subprocess.run(["clang-tidy", "-p", build, *TIDY_ARGS, file], capture_output=True)
    output = (run.stdout + run.stderr).decode(errors="replace")
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
    context = hashlib.sha256(version)
    context.update(" ".join(TIDY_ARGS).encode())
    for config in configs:
        with open(config, "rb") as f:
            context.update(config.replace(source, "@SOURCE@").encode() + b"\0" + f.read())
    context = context.digest()

    databases = load_databases([os.path.realpath(b) for b in options.builds])
    hashes = FileHashes()
    files = [os.path.realpath(f) for f in options.files]
    missing = [f for f in files if f not in databases]
    if missing:
        for f in missing:
            print(f"clang-tidy: {os.path.relpath(f, source)} is in no compile database ({', '.join(options.builds)}): "
                  "no tree builds it", file=sys.stderr)
        return 1

    def check(file):
        build, entry = databases[file]
        key, why = key_of(entry, source, context, hashes)
        stamp = os.path.join(options.cache, key[:2], key) if key else None
        if stamp and os.path.exists(stamp):
            return file, "cached", ""
        clean, output = tidy(file, build)
        if not clean:
            return file, "findings", (why or "") + output
        if stamp:
            os.makedirs(os.path.dirname(stamp), exist_ok=True)
            with open(stamp + ".partial", "w") as f:
                f.write(os.path.relpath(file, source) + "\n")
            os.replace(stamp + ".partial", stamp)
        return file, "checked", ""

    counts = {"cached": 0, "checked": 0, "findings": 0}
    failures = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, options.jobs)) as pool:
        for file, verdict, output in pool.map(check, files):
            counts[verdict] += 1
            if verdict == "findings":
                failures.append((file, output))
    log = open(options.log, "w") if options.log else None
    for file, output in failures:
        if log:
            log.write(f"=== {os.path.relpath(file, source)}\n{output}\n")
        for line in output.splitlines():
            if "warning:" in line or "error:" in line:
                print(line)
    if log:
        log.close()
    print(f"clang-tidy: {len(files)} translation units: {counts['cached']} clean in the cache, "
          f"{counts['checked']} checked clean now, {counts['findings']} with findings")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
