#!/usr/bin/env python3
"""Fails when the top-level modules of a crate import each other in a circle.

For each crate under crates/, every file under src/ belongs to a top-level module (src/x.rs
and src/x/** are module `x`; lib.rs, main.rs and build scripts belong to none). A reference
`crate::y` (in a `use`, a path or a doc-free code line) from module x to y != x is an edge x -> y.
Submodules of one top-level module may refer to each other freely; between top-level modules
the graph must be acyclic, so that each layer can be read, tested and replaced without the ones
above it. Prints each cycle found and exits 1; prints the layering (a topological order) and
exits 0 otherwise.

Usage: tests/arch/module-cycles.py [crate dir ...]   (default: every crate under crates/)
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def top_module(src, path):
    rel = os.path.relpath(path, src)
    first = rel.split(os.sep)[0]
    if first in ("lib.rs", "main.rs", "bin"):
        return None
    return first[:-3] if first.endswith(".rs") else first


def strip_comments(text):
    # Line comments (including doc comments: their links are not imports) and block comments.
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return "\n".join(line.split("//", 1)[0] for line in text.split("\n"))


def crate_edges(crate):
    src = os.path.join(crate, "src")
    edges = {}
    mods = set()
    for dirpath, _, files in os.walk(src):
        for f in files:
            if not f.endswith(".rs"):
                continue
            path = os.path.join(dirpath, f)
            m = top_module(src, path)
            if m is None:
                continue
            mods.add(m)
            text = strip_comments(open(path, encoding="utf-8").read())
            targets = set(re.findall(r"\bcrate::([a-z_][a-z0-9_]*)", text))
            # `use crate::{a, b::c}` lists
            for group in re.findall(r"\bcrate::\{([^}]*)\}", text):
                targets |= set(re.findall(r"(?:^|,)\s*([a-z_][a-z0-9_]*)", group))
            for t in targets:
                if t != m:
                    edges.setdefault(m, set()).add(t)
    # Only edges to real top-level modules (crate::SomeMacro etc. are not modules).
    return mods, {m: {t for t in ts if t in mods} for m, ts in edges.items()}


def find_cycles(mods, edges):
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
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

    sys.setrecursionlimit(10000)
    for v in sorted(mods):
        if v not in index:
            visit(v)
    return out


def layers(mods, edges):
    """Modules in layers: each depends only on modules of lower layers."""
    level = {}

    def depth(v, seen=()):
        if v in level:
            return level[v]
        d = 0
        for w in edges.get(v, ()):
            if w not in seen:
                d = max(d, depth(w, seen + (v,)) + 1)
        level[v] = d
        return d

    for m in mods:
        depth(m)
    by = {}
    for m, d in level.items():
        by.setdefault(d, []).append(m)
    return [sorted(by[d]) for d in sorted(by)]


def main():
    crates = sys.argv[1:] or sorted(
        os.path.join(ROOT, "crates", c) for c in os.listdir(os.path.join(ROOT, "crates"))
        if os.path.isdir(os.path.join(ROOT, "crates", c, "src")))
    bad = False
    for crate in crates:
        mods, edges = crate_edges(crate)
        name = os.path.basename(crate.rstrip("/"))
        cycles = find_cycles(mods, edges)
        if cycles:
            bad = True
            for c in cycles:
                detail = "; ".join(f"{a} -> {', '.join(sorted(edges.get(a, set()) & set(c)))}" for a in c)
                print(f"{name}: import cycle among {', '.join(c)} ({detail})")
        else:
            print(f"{name}: no import cycle; layers (lowest first): "
                  + " | ".join(" ".join(l) for l in layers(mods, edges)))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
