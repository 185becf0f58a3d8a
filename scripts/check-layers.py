#!/usr/bin/env python3
"""The architecture, checked: workspace members in layers, and no circle of
imports between the modules (files) of any crate.

1. Each member may depend only on members in lower layers (LAYERS, from
   the bottom); `cargo metadata` gives the edges.
2. Inside each crate, the files' imports (`crate::`, `super::`, `self::`
   paths, and a module's paths into its declared children) must not form
   a circle. A module's references to its own descendants (re-exports,
   the facade it offers) are not counted; test code (`#[cfg(test)]` items,
   `tests.rs`, `*_tests.rs`) is left out.

Exit status 1 with the reason on any violation. Usage: scripts/check-layers.py
"""
import json, os, re, subprocess, sys

LAYERS = [
    ["gtm-cluster"],
    ["gtm-model"],
    ["gtm-resolve", "gtm-geo", "gtm-alerts"],
    ["gtm-health"],
    ["gtm-dns"],
    ["gtm-engine"],
    ["gtm-node"],
    ["gtm-api"],
    ["gtm"],
]
LAYER = {name: i for i, names in enumerate(LAYERS) for name in names}

def members():
    meta = json.loads(subprocess.run(
        ["cargo", "metadata", "--no-deps", "--format-version", "1"],
        check=True, capture_output=True, text=True).stdout)
    return meta["packages"]

def strip(text):
    text = re.sub(r"//[^\n]*", "", text)
    out, pos = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?(?:mod|fn|impl|use|struct|const|static)\b", text):
        if m.start() < pos:
            continue
        out.append(text[pos:m.start()])
        semi, brace = text.find(";", m.end()), text.find("{", m.end())
        if brace < 0 or 0 <= semi < brace:
            pos = semi + 1
            continue
        depth, k = 0, brace
        while k < len(text):
            depth += {"{": 1, "}": -1}.get(text[k], 0)
            if depth == 0:
                break
            k += 1
        pos = k + 1
    out.append(text[pos:])
    return "".join(out)

def module_files(src):
    """module path (tuple) -> file, for every file under src."""
    mods = {}
    for root, _, files in os.walk(src):
        for f in files:
            if not f.endswith(".rs"):
                continue
            rel = os.path.relpath(os.path.join(root, f), src)[:-3].split(os.sep)
            if rel[-1] in ("lib", "main", "mod"):
                rel = rel[:-1]
            if rel and rel[-1] in ("tests",) or rel and rel[-1].endswith("_tests"):
                continue
            mods[tuple(rel)] = os.path.join(root, f)
    return mods

def resolve(mods, path):
    for n in range(len(path), -1, -1):
        if tuple(path[:n]) in mods:
            return tuple(path[:n])
    return ()

def paths_in(text):
    """Every path a file names: `a::b::c`, with `use` groups expanded."""
    found = []
    for m in re.finditer(r"\buse\s+([^;]*);", text):
        found += expand(m.group(1).replace("\n", " "))
    found += [p.split("::") for p in re.findall(r"\b(?:crate|super|self)(?:::\w+)+", text)]
    return found

def expand(tree, prefix=""):
    tree = tree.strip()
    m = re.match(r"^([\w:]*?)::\{(.*)\}$", tree, re.S)
    if not m:
        name = tree.split(" as ")[0].strip()
        return [(prefix + name).split("::")] if name else []
    base, body = prefix + m.group(1) + "::", m.group(2)
    parts, depth, cur = [], 0, ""
    for ch in body:
        depth += {"{": 1, "}": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            parts.append(cur); cur = ""
        else:
            cur += ch
    parts.append(cur)
    out = []
    for p in parts:
        out += expand(p, base)
    return out

def crate_cycles(src):
    mods = module_files(src)
    edges = {m: set() for m in mods}
    for mod, path in mods.items():
        text = strip(open(path).read())
        children = set(re.findall(r"\bmod\s+(\w+)\s*;", text))
        for p in paths_in(text):
            if p[0] == "crate":
                target = p[1:]
            elif p[0] in ("super", "self"):
                base = list(mod)
                while p and p[0] in ("super", "self"):
                    if p[0] == "super":
                        base = base[:-1]
                    p = p[1:]
                target = base + p
            elif p[0] in children:
                target = list(mod) + p
            else:
                continue
            dest = resolve(mods, target)
            if dest != mod and dest[:len(mod)] != mod:
                edges[mod].add(dest)
    # Tarjan's strongly connected components
    index, low, stack, on, sccs, counter = {}, {}, [], set(), [], [0]
    def visit(v):
        index[v] = low[v] = counter[0]; counter[0] += 1
        stack.append(v); on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w); low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = []
            while True:
                w = stack.pop(); on.discard(w); scc.append(w)
                if w == v:
                    break
            if len(scc) > 1:
                inner = set(scc)
                ties = sorted(f"{'/'.join(a) or 'lib'} -> {'/'.join(b) or 'lib'}" for a in scc for b in edges[a] if b in inner)
                sccs.append((sorted(os.path.relpath(mods[m]) for m in scc), ties))
    sys.setrecursionlimit(10000)
    for v in mods:
        if v not in index:
            visit(v)
    return sccs

def main():
    failed = False
    pkgs = members()
    names = {p["name"] for p in pkgs}
    for p in sorted(pkgs, key=lambda p: LAYER.get(p["name"], 99)):
        name = p["name"]
        if name not in LAYER:
            print(f"{name}: not in a layer of scripts/check-layers.py"); failed = True
            continue
        deps = sorted({d["name"] for d in p["dependencies"] if d["name"] in names and d.get("kind") is None})
        print(f"{LAYER[name]} {name} -> {', '.join(deps) or '(none)'}")
        for d in deps:
            if LAYER[d] >= LAYER[name]:
                print(f"  {name} depends on {d}, which is not below it"); failed = True
        src = os.path.join(os.path.dirname(p["manifest_path"]), "src")
        for files, ties in crate_cycles(src):
            print(f"  {name}: modules import each other in a circle: {', '.join(files)}")
            print(f"    ties: {'; '.join(ties)}"); failed = True
    print("layers: " + ("FAILED" if failed else "ok"))
    sys.exit(1 if failed else 0)

main()
