#!/usr/bin/env python3
"""Reports import circles between the modules of each crate under crates/.

    python3 scripts/module_cycles.py [CRATE_DIR ...]     # default: every crates/*/

For each crate, every file under src/ is a module (lib.rs and main.rs are the root, a.rs and
a/mod.rs are `a`, a/b.rs is `a::b`; src/bin/*.rs are separate roots and skipped). A module
depends on another when its code (outside `#[cfg(test)]` blocks and comments) names a path
`crate::x::…`, `super::x::…` or `self::x::…`, including `use` lists with braces. Paths to
an ancestor module (the crate root's re-exports, a parent's items) are not dependencies: the
parent declares the child. A dependency of `a::x` on `b::y` counts between the siblings `a`
and `b` (the children of their deepest common ancestor), so a circle is reported at the
level where it runs. Exit status 1 when any crate has a circle, 0 otherwise.
"""

import os
import re
import sys
from collections import defaultdict

PATH_RE = re.compile(r"\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)+|::\{)")


def module_of(src, path):
    rel = os.path.relpath(path, src)[: -len(".rs")].split(os.sep)
    if rel in (["lib"], ["main"]):
        return ()
    if rel[-1] == "mod":
        rel = rel[:-1]
    return tuple(rel)


def strip_code(text):
    """Drops comments and `#[cfg(test)]` items (a test module may use anything)."""
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    lines = [ln.split("//")[0] if "\"" not in ln else re.sub(r"^\s*//.*", "", ln) for ln in text.split("\n")]
    out, skip_depth, i = [], None, 0
    pending_cfg_test = False
    for ln in lines:
        if skip_depth is not None:
            skip_depth += ln.count("{") - ln.count("}")
            if skip_depth <= 0 and "}" in ln:
                skip_depth = None
            continue
        if re.match(r"\s*#\[cfg\(test\)\]", ln):
            pending_cfg_test = True
            continue
        if pending_cfg_test:
            pending_cfg_test = False
            if "{" in ln:
                depth = ln.count("{") - ln.count("}")
                if depth > 0:
                    skip_depth = depth
                continue
            if ln.strip().endswith(";"):
                continue
        out.append(ln)
        i += 1
    return "\n".join(out)


def expand_use_lists(text):
    """Turns `crate::a::{b, c::d}` into `crate::a::b crate::a::c::d` (one level of braces
    at a time, repeated until none are left)."""
    pat = re.compile(r"\b((?:crate|super|self)(?:::[A-Za-z_][A-Za-z0-9_]*)*)::\{([^{}]*)\}")
    while True:
        new = pat.sub(
            lambda m: " ".join(
                f"{m.group(1)}::{p.strip()}" if p.strip() not in ("self", "") else m.group(1)
                for p in m.group(2).split(",")
                if p.strip()
            ),
            text,
        )
        if new == text:
            return text
        text = new


def resolve(modules, here, kind, segs):
    if kind == "crate":
        base = ()
    elif kind == "super":
        base = here[:-1]
    else:
        base = here
    segs = list(segs)
    while segs and segs[0] == "super":
        base = base[:-1]
        segs = segs[1:]
    best = base
    for k in range(1, len(segs) + 1):
        cand = base + tuple(segs[:k])
        if cand in modules:
            best = cand
        else:
            break
    return best


def crate_graph(crate_dir):
    src = os.path.join(crate_dir, "src")
    files = []
    for root, dirs, names in os.walk(src):
        if os.path.relpath(root, src).split(os.sep)[0] == "bin":
            continue
        files += [os.path.join(root, n) for n in names if n.endswith(".rs")]
    modules = {module_of(src, f): f for f in files}
    edges = defaultdict(set)  # (parent) -> {(a, b)}: sibling a depends on sibling b
    for mod, f in modules.items():
        text = expand_use_lists(strip_code(open(f, encoding="utf-8").read()))
        for m in PATH_RE.finditer(text):
            kind = m.group(1)
            segs = [s for s in m.group(2).split("::") if s and s != "{"]
            target = resolve(modules, mod, kind, segs)
            # ancestors (and the module itself) are not dependencies
            if mod[: len(target)] == target:
                continue
            k = 0
            while k < min(len(mod), len(target)) and mod[k] == target[k]:
                k += 1
            if k >= len(mod):
                continue  # a parent naming its own child
            edges[mod[:k]].add((mod[: k + 1], target[: k + 1]))
    return modules, edges


def cycles(pairs):
    """Strongly connected components with more than one node (Tarjan)."""
    graph = defaultdict(set)
    for a, b in pairs:
        graph[a].add(b)
        graph.setdefault(b, set())
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
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


def main(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    crates = argv[1:] or sorted(
        os.path.join(here, "..", "crates", c) for c in os.listdir(os.path.join(here, "..", "crates"))
    )
    found = 0
    for crate_dir in crates:
        if not os.path.isdir(os.path.join(crate_dir, "src")):
            continue
        name = os.path.basename(os.path.normpath(crate_dir))
        _, edges = crate_graph(crate_dir)
        for parent, pairs in sorted(edges.items()):
            for comp in cycles(pairs):
                found += 1
                names = ["::".join(m) for m in comp]
                inner = [f"{'::'.join(a)} -> {'::'.join(b)}" for a, b in sorted(pairs) if a in comp and b in comp]
                print(f"{name}: circle {{{', '.join(names)}}}: {'; '.join(inner)}")
    if found:
        print(f"{found} import circle(s)")
        return 1
    print("no import circles")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
