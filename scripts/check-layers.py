#!/usr/bin/env python3
"""The tree reads as the design (issue 12): no file of src/ includes a file
of a layer above its own (core < data < backend < loader), and no two
library objects call each other. Usage: check-layers.py BUILD_DIR
(a CMake build of the library: its object files are read with nm)."""
import collections
import glob
import os
import re
import subprocess
import sys

RANK = {"core": 0, "data": 1, "backend": 2, "loader": 3}
HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "..", "src")


def layer(path):
    return RANK[path.split("/")[0]]


def include_errors():
    bad = []
    for p in glob.glob(os.path.join(SRC, "**", "*.*"), recursive=True):
        rel = os.path.relpath(p, SRC)
        if not rel.endswith((".c", ".h", ".cu")):
            continue
        for m in re.finditer(r'#include "([a-z_]+)/([^"]+)"', open(p).read()):
            if m.group(1) in RANK and RANK[m.group(1)] > layer(rel):
                bad.append("%s includes %s/%s, a layer above it" % (rel, m.group(1), m.group(2)))
    return bad


def call_errors(build):
    objs = glob.glob(os.path.join(build, "CMakeFiles", "pinloader_static.dir", "src", "**", "*.o"),
                     recursive=True)
    if not objs:
        return ["no library objects under %s" % build]
    defs, uses = {}, collections.defaultdict(set)
    for o in objs:
        name = o.split(os.sep + "src" + os.sep, 1)[1][:-2]  # loader/loader.c
        for line in subprocess.run(["nm", o], capture_output=True, text=True).stdout.splitlines():
            f = line.split()
            if len(f) == 3 and f[1] in "TDBR":
                defs[f[2]] = name
            elif len(f) == 2 and f[0] == "U":
                uses[name].add(f[1])
    calls = collections.defaultdict(set)
    for name, syms in uses.items():
        for s in syms:
            if s in defs and defs[s] != name:
                calls[name].add(defs[s])
    bad = []
    for a, targets in calls.items():
        for b in targets:
            if a < b and a in calls.get(b, ()):
                bad.append("%s and %s call each other" % (a, b))
            if layer(b) > layer(a):
                bad.append("%s calls into %s, a layer above it" % (a, b))
    return bad


def main():
    bad = include_errors() + call_errors(sys.argv[1])
    for b in bad:
        print("check-layers:", b)
    print("check-layers: %s" % ("ok" if not bad else "%d problem(s)" % len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
