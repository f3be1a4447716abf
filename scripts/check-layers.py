#!/usr/bin/env python3
"""The tree reads as the design: no file of src/ includes a file of a layer
above its own (core < data < backend < loader), no two library objects
call each other, and no circle of files: neither includes nor calls go
round a folder of src/ (A calls B calls C calls A), nor round the Python
extension's files (python/pinloader/*.c, compiled here for the check).
Usage: check-layers.py BUILD_DIR (a CMake build of the library: its object
files are read with nm)."""
import collections
import glob
import os
import re
import subprocess
import sys
import sysconfig
import tempfile

RANK = {"core": 0, "data": 1, "backend": 2, "loader": 3}
HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "..", "src")
EXT = os.path.join(HERE, "..", "python", "pinloader")
INCLUDE = os.path.join(HERE, "..", "include")


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


def circles(graph):
    """The strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def by_folder(graph):
    """The edges between files of one folder."""
    return {a: {b for b in bs if os.path.dirname(b) == os.path.dirname(a)}
            for a, bs in graph.items()}


def include_graph(root, local):
    """file -> the files it includes, paths relative to root; `local`: a
    quoted name is looked up next to the file (the extension), else under
    root (src/: "loader/pool.h")."""
    graph = {}
    for p in glob.glob(os.path.join(root, "**", "*.*"), recursive=True):
        rel = os.path.relpath(p, root)
        if not rel.endswith((".c", ".h", ".cu")):
            continue
        deps = set()
        for m in re.finditer(r'#include "([^"]+)"', open(p).read()):
            dep = os.path.join(os.path.dirname(rel), m.group(1)) if local else m.group(1)
            if os.path.isfile(os.path.join(root, dep)):
                deps.add(os.path.normpath(dep))
        graph[rel] = deps
    return graph


def include_circles():
    bad = []
    for what, graph in (("src", by_folder(include_graph(SRC, False))),
                        ("python/pinloader", include_graph(EXT, True))):
        for comp in circles(graph):
            bad.append("%s: the includes go round %s" % (what, " ".join(comp)))
    return bad


def object_calls(objs, name_of):
    """object name -> the objects whose symbols it uses (nm)."""
    defs, uses = {}, collections.defaultdict(set)
    for o in objs:
        name = name_of(o)
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
    return calls


def call_errors(build):
    objs = glob.glob(os.path.join(build, "CMakeFiles", "pinloader_static.dir", "src", "**", "*.o"),
                     recursive=True)
    # An object whose source is gone (a file split or renamed) is stale.
    objs = [o for o in objs
            if os.path.isfile(os.path.join(SRC, o.split(os.sep + "src" + os.sep, 1)[1][:-2]))]
    if not objs:
        return ["no library objects under %s" % build]
    calls = object_calls(objs, lambda o: o.split(os.sep + "src" + os.sep, 1)[1][:-2])
    bad = ["src: the calls go round %s" % " ".join(c) for c in circles(by_folder(calls))]
    for a, targets in calls.items():
        for b in targets:
            if a < b and a in calls.get(b, ()):
                bad.append("%s and %s call each other" % (a, b))
            if layer(b) > layer(a):
                bad.append("%s calls into %s, a layer above it" % (a, b))
    return bad


def python_include():
    inc = sysconfig.get_paths()["include"]
    if os.path.isfile(os.path.join(inc, "Python.h")):
        return inc
    found = sorted(glob.glob("/usr/include/python3*/Python.h"))
    return os.path.dirname(found[-1]) if found else None


def extension_errors():
    """The extension's files compiled (-c only) and their calls read."""
    pyinc = python_include()
    if not pyinc:
        return ["no Python.h to compile the extension's files with"]
    srcs = sorted(glob.glob(os.path.join(EXT, "*.c")))
    with tempfile.TemporaryDirectory() as tmp:
        objs = []
        for c in srcs:
            o = os.path.join(tmp, os.path.basename(c) + ".o")
            r = subprocess.run(["cc", "-std=c11", "-D_GNU_SOURCE", "-DPL_STATIC_DEFINE=1",
                                "-fvisibility=hidden", "-c", c, "-o", o, "-I", INCLUDE,
                                "-I", SRC, "-I", EXT, "-I", pyinc],
                               capture_output=True, text=True)
            if r.returncode:
                return ["%s does not compile: %s" % (c, r.stderr[-500:])]
            objs.append(o)
        calls = object_calls(objs, lambda o: os.path.basename(o)[:-2])
    bad = ["python/pinloader: the calls go round %s" % " ".join(c) for c in circles(calls)]
    return bad


def self_test():
    """The circle finder on graphs whose answer is known: a check that
    finds nothing because it is broken must not pass."""
    bad = []
    if circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) != [["a", "b", "c"]]:
        bad.append("self-test: a circle of three files not found")
    if circles({"a": {"b", "c"}, "b": {"c"}, "c": set()}):
        bad.append("self-test: a circle found in a tree")
    if by_folder({"x/a.c": {"x/b.c", "y/c.c"}}) != {"x/a.c": {"x/b.c"}}:
        bad.append("self-test: by_folder keeps an edge out of the folder")
    return bad


def main():
    bad = self_test() + include_errors() + include_circles() + call_errors(sys.argv[1]) + extension_errors()
    for b in bad:
        print("check-layers:", b)
    print("check-layers: %s" % ("ok" if not bad else "%d problem(s)" % len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
