#!/usr/bin/env python3
"""Checks the size and shape constraints on the Rust sources (CI runs it after rustfmt).

    python3 scripts/structure_check.py [--allow FILE] [--max-file N] [--max-fn N]

Reported, each with path:line and its length:

  (a) every file under crates/*/src whose code outside its tests (every `#[cfg(test)]` item
      removed, usually the trailing `mod tests { … }`) is over 800 lines;
  (b) every `fn` in crates/*/src, crates/*/examples and crates/*/benches, test code excluded,
      that is over 120 lines, counted from the line of the `fn` keyword to the line of its
      closing brace; a fn nested in another fn (or in a closure inside it) counts towards the
      outer one, which is the one reported;
  (c) every `#[allow(clippy::too_many_arguments)]` (or `#![allow(…)]` naming that lint) outside
      test code in the same files;
  (d) the import circles between the modules of a crate that scripts/module_cycles.py finds.

Test code is an item under `#[cfg(test)]` (or `#[cfg(all(test, …))]`), a `#[test]` fn, and a
file that a `#[cfg(test)] mod name;` declaration pulls in. The scanner is a small Rust lexer:
comments, string literals (raw ones included), char literals and lifetimes are told apart, so
a brace inside a string or a comment is not counted.

Exceptions live in an explicit allow-list (default scripts/structure_allow.txt), one per line:

    crates/x/src/file.rs::function_name | reason      (a long fn; every fn of that name there)
    crates/x/src/file.rs | reason                     (a long file)

Blank lines and lines starting with `#` are comments; an entry without a reason is an error,
and so is an entry that matches nothing (remove it once the code is fixed), so the list cannot
rot. Allowed findings are still printed, marked "allowed".

Exit status 1 when anything not allowed is found (or the allow-list is malformed or stale),
0 otherwise.
"""

import argparse
import io
import os
import re
import sys
from contextlib import redirect_stdout

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, ".."))
MAX_FILE_LINES = 800
MAX_FN_LINES = 120
LINT = "clippy::too_many_arguments"


# --------------------------------------------------------------------------------------------
# Lexer: tokens (kind, text, line) with comments dropped and literals kept whole.
# --------------------------------------------------------------------------------------------

IDENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
RAW_STR_RE = re.compile(r'(?:b|c)?r(#*)"')
CHAR_RE = re.compile(r"'(?:\\(?:u\{[0-9A-Fa-f_]*\}|x[0-9A-Fa-f]{2}|.)|[^\\'\n])'")
NUMBER_RE = re.compile(r"[0-9][0-9A-Za-z_]*(?:\.[0-9][0-9A-Za-z_]*)?")


def tokenize(text):
    """Splits Rust source into tokens `(kind, text, line)`, kind one of "ident", "punct",
    "lit" (string, char and number literals) and "lifetime"; comments are dropped."""
    toks = []
    i, n, line = 0, len(text), 1
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
            continue
        if c in " \t\r":
            i += 1
            continue
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        if text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            line += text.count("\n", i, j)
            i = j
            continue
        m = RAW_STR_RE.match(text, i)
        if m and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            close = '"' + m.group(1)
            j = text.find(close, m.end())
            j = n if j < 0 else j + len(close)
            toks.append(("lit", "str", line))
            line += text.count("\n", i, j)
            i = j
            continue
        if c == '"' or (c in "bc" and text.startswith('"', i + 1) and not _ident_before(text, i)):
            j = i + (1 if c == '"' else 2)
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j += 1
            toks.append(("lit", "str", line))
            line += text.count("\n", i, j)
            i = j
            continue
        if c == "'" or (c == "b" and text.startswith("'", i + 1) and not _ident_before(text, i)):
            start = i + (1 if c == "b" else 0)
            m = CHAR_RE.match(text, start)
            if m:
                toks.append(("lit", "char", line))
                i = m.end()
                continue
            m = IDENT_RE.match(text, i + 1)
            if c == "'" and m:
                toks.append(("lifetime", m.group(0), line))
                i = m.end()
                continue
            toks.append(("punct", c, line))
            i += 1
            continue
        if c.isdigit():
            m = NUMBER_RE.match(text, i)
            toks.append(("lit", m.group(0), line))
            i = m.end()
            continue
        m = IDENT_RE.match(text, i)
        if m:
            word = m.group(0)
            if word == "r" and text.startswith("#", m.end()):  # raw identifier r#name
                m2 = IDENT_RE.match(text, m.end() + 1)
                if m2:
                    toks.append(("ident", m2.group(0), line))
                    i = m2.end()
                    continue
            toks.append(("ident", word, line))
            i = m.end()
            continue
        toks.append(("punct", c, line))
        i += 1
    return toks


def _ident_before(text, i):
    return i > 0 and (text[i - 1].isalnum() or text[i - 1] == "_")


# --------------------------------------------------------------------------------------------
# Items: attributes, test items, fns.
# --------------------------------------------------------------------------------------------

OPEN, CLOSE = "([{", ")]}"


def match_close(toks, k):
    """Index of the token closing the bracket opened at `toks[k]` (or the last token)."""
    depth = 0
    for j in range(k, len(toks)):
        kind, t, _ = toks[j]
        if kind != "punct":
            continue
        if t in OPEN:
            depth += 1
        elif t in CLOSE:
            depth -= 1
            if depth == 0:
                return j
    return len(toks) - 1


def item_end(toks, k):
    """Index of the last token of the item starting at `toks[k]`: its first top-level `;` or the
    closing brace of its first top-level `{ … }` (a trailing `;` after it included)."""
    j = k
    while j < len(toks):
        kind, t, _ = toks[j]
        if kind == "punct" and t == ";":
            return j
        if kind == "punct" and t in "([":
            j = match_close(toks, j) + 1
            continue
        if kind == "punct" and t == "{":
            j = match_close(toks, j)
            if j + 1 < len(toks) and toks[j + 1][:2] == ("punct", ";"):
                j += 1
            return j
        j += 1
    return len(toks) - 1


def attr_words(toks, k, close):
    return [t for kind, t, _ in toks[k:close + 1] if kind == "ident"]


def is_test_attr(toks, k, close):
    """`#[test]`, `#[cfg(test)]` or `#[cfg(all(test, …))]` (not `cfg(not(test))` or
    `cfg(any(test, …))`, which also build outside tests)."""
    words = attr_words(toks, k, close)
    if words == ["test"]:
        return True
    if words[:1] != ["cfg"]:
        return False
    return words[1:2] == ["test"] or words[1:3] == ["all", "test"]


def names_lint(toks, k, close):
    words = attr_words(toks, k, close)
    if words[:1] != ["allow"]:
        return False
    body = "".join(t for _, t, _ in toks[k:close + 1])
    return LINT in body


def scan_file(text):
    """Scans one file. Returns a dict with the fns (name, first line, last line, nested), the
    lint allows (line), the line spans of test items and the module names that a
    `#[cfg(test)] mod name;` declares."""
    toks = tokenize(text)
    fns, allows, test_spans, test_mods = [], [], [], []
    open_fns = []  # token indices where the enclosing fns' bodies close
    pending_test = False  # or the line of the test attribute that the next item is under
    k = 0
    while k < len(toks):
        while open_fns and k > open_fns[-1]:
            open_fns.pop()
        kind, t, line = toks[k]
        if kind == "punct" and t == "#":
            inner = k + 1 < len(toks) and toks[k + 1][:2] == ("punct", "!")
            b = k + (2 if inner else 1)
            if b < len(toks) and toks[b][:2] == ("punct", "["):
                close = match_close(toks, b)
                if is_test_attr(toks, b, close) and not inner:
                    pending_test = pending_test or line
                elif names_lint(toks, b, close):
                    allows.append(line)
                k = close + 1
                continue
        if pending_test:
            end = item_end(toks, k)
            test_spans.append((pending_test, toks[end][2]))
            pending_test = False
            words = [w for kk, w, _ in toks[k:end + 1] if kk == "ident"]
            if "mod" in words and toks[end][1] == ";":
                idx = words.index("mod")
                if idx + 1 < len(words):
                    test_mods.append(words[idx + 1])
            k = end + 1
            continue
        if kind == "ident" and t == "fn" and k + 1 < len(toks) and toks[k + 1][0] == "ident":
            body = fn_body_start(toks, k + 2)
            if body is not None:
                end = match_close(toks, body)
                fns.append(
                    {"name": toks[k + 1][1], "line": line, "end": toks[end][2], "nested": bool(open_fns)}
                )
                open_fns.append(end)
                k = body + 1
                continue
        k += 1
    return {"fns": fns, "allows": allows, "test_spans": test_spans, "test_mods": test_mods}


def fn_body_start(toks, k):
    """Index of the `{` opening the body of the fn whose signature starts at `toks[k]`, or None
    for a declaration without a body (`fn f();` in a trait or an extern block)."""
    j = k
    while j < len(toks):
        kind, t, _ = toks[j]
        if kind == "punct" and t in "([":
            j = match_close(toks, j) + 1
            continue
        if kind == "punct" and t == "{":
            return j
        if kind == "punct" and t == ";":
            return None
        j += 1
    return None


# --------------------------------------------------------------------------------------------
# The checks.
# --------------------------------------------------------------------------------------------


def rust_files(root):
    """(path, kind) for every .rs file of crates/*/{src,examples,benches}; kind is "src" for
    the files under src/ (the only ones the file-length rule applies to)."""
    out = []
    crates = os.path.join(root, "crates")
    for crate in sorted(os.listdir(crates)):
        for sub in ("src", "examples", "benches"):
            base = os.path.join(crates, crate, sub)
            for dirpath, dirs, names in os.walk(base):
                dirs.sort()
                for name in sorted(names):
                    if name.endswith(".rs"):
                        out.append((os.path.join(dirpath, name), sub))
    return out


def test_module_files(path, test_mods):
    """The files that `#[cfg(test)] mod name;` in `path` pulls in."""
    d = os.path.dirname(path)
    stem = os.path.splitext(os.path.basename(path))[0]
    if stem not in ("lib", "main", "mod"):
        d = os.path.join(d, stem)
    out = set()
    for m in test_mods:
        out.add(os.path.normpath(os.path.join(d, m + ".rs")))
        out.add(os.path.normpath(os.path.join(d, m, "mod.rs")))
    return out


def non_test_lines(text, spans):
    """Lines of the file outside its test items (a trailing newline does not start a line)."""
    total = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
    covered = set()
    for a, b in spans:
        covered.update(range(a, b + 1))
    return total - len(covered)


def structure_findings(root, max_file, max_fn):
    """Findings of checks (a)–(c): a list of dicts with the key used by the allow-list."""
    files = rust_files(root)
    scans = {}
    test_files = set()
    for path, sub in files:
        text = open(path, encoding="utf-8").read()
        scans[path] = (sub, text, scan_file(text))
        test_files |= test_module_files(path, scans[path][2]["test_mods"])
    findings = []
    for path, (sub, text, scan) in scans.items():
        rel = os.path.relpath(path, root)
        if os.path.normpath(path) in test_files:
            continue
        if sub == "src":
            lines = non_test_lines(text, scan["test_spans"])
            if lines > max_file:
                findings.append(
                    {"key": rel, "where": f"{rel}:1", "what": f"file: {lines} lines outside its tests (max {max_file})"}
                )
        for f in scan["fns"]:
            length = f["end"] - f["line"] + 1
            if f["nested"] or length <= max_fn:
                continue
            findings.append(
                {
                    "key": f"{rel}::{f['name']}",
                    "where": f"{rel}:{f['line']}",
                    "what": f"fn {f['name']}: {length} lines (max {max_fn})",
                }
            )
        for line in scan["allows"]:
            findings.append(
                {"key": None, "where": f"{rel}:{line}", "what": f"#[allow({LINT})]: take an argument struct instead"}
            )
    findings.sort(key=lambda f: (f["where"].split(":")[0], int(f["where"].split(":")[1])))
    return findings


def cycle_findings(root):
    """Check (d), through scripts/module_cycles.py."""
    sys.path.insert(0, HERE)
    import module_cycles  # noqa: E402

    buf = io.StringIO()
    crates = sorted(os.path.join(root, "crates", c) for c in os.listdir(os.path.join(root, "crates")))
    with redirect_stdout(buf):
        status = module_cycles.main(["module_cycles.py"] + crates)
    if status == 0:
        return []
    return [
        {"key": None, "where": "crates/" + ln.split(":")[0] + "/src", "what": "import " + ln.split(": ", 1)[1]}
        for ln in buf.getvalue().splitlines()
        if ": circle " in ln
    ]


def read_allow_list(path):
    """Entries `key -> reason`; errors (a missing reason) as a list of strings."""
    entries, errors = {}, []
    if not os.path.exists(path):
        return entries, errors
    for no, raw in enumerate(open(path, encoding="utf-8"), 1):
        ln = raw.strip()
        if not ln or ln.startswith("#"):
            continue
        key, _, reason = (p.strip() for p in ln.partition("|"))
        if not reason:
            errors.append(f"{path}:{no}: entry `{key}` has no reason (write `{key} | why`)")
            continue
        entries[key] = reason
    return entries, errors


def self_test():
    """Checks the scanner on small sources whose answers are known (run with --self-test)."""
    src = "\n".join(
        [
            "fn a<'x>(s: &'x str) -> char {",  # 1: a lifetime, then a char literal
            "    let _ = \"}\"; let _ = r#\"}{\"#; let c = '}';",
            "    /* } /* nested } */ */ // }",
            "    fn inner() { let f = |x: u8| { x }; }",
            "    c",
            "}",  # 6
            "trait T { fn decl(&self); fn body(&self) -> fn(u8) -> u8 { |x| x } }",  # 7
            "#[allow(clippy::too_many_arguments)]",  # 8
            "fn many() {}",
            "#[cfg(test)]",  # 10
            "mod tests {",
            "    #[allow(clippy::too_many_arguments)]",
            "    fn in_test() {}",
            "}",  # 14
            "#[cfg(test)]",
            "mod more;",  # 16
            "",
        ]
    )
    scan = scan_file(src)
    got = [(f["name"], f["line"], f["end"], f["nested"]) for f in scan["fns"]]
    want = [("a", 1, 6, False), ("inner", 4, 4, True), ("body", 7, 7, False), ("many", 9, 9, False)]
    assert got == want, got
    assert scan["allows"] == [8], scan["allows"]
    assert scan["test_spans"] == [(10, 14), (15, 16)], scan["test_spans"]
    assert scan["test_mods"] == ["more"], scan["test_mods"]
    assert non_test_lines(src, scan["test_spans"]) == 16 - 7, non_test_lines(src, scan["test_spans"])
    print("structure check self-test: ok")


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--allow", default=os.path.join(HERE, "structure_allow.txt"), help="allow-list file")
    ap.add_argument("--max-file", type=int, default=MAX_FILE_LINES, help="max lines of a file outside its tests")
    ap.add_argument("--max-fn", type=int, default=MAX_FN_LINES, help="max lines of a fn")
    ap.add_argument("--root", default=ROOT, help="repository root")
    ap.add_argument("--self-test", action="store_true", help="check the scanner on known sources, then the tree")
    args = ap.parse_args(argv[1:])
    if args.self_test:
        self_test()

    findings = structure_findings(args.root, args.max_file, args.max_fn) + cycle_findings(args.root)
    allowed, errors = read_allow_list(args.allow)
    used = set()
    bad = 0
    for f in findings:
        if f["key"] is not None and f["key"] in allowed:
            used.add(f["key"])
            print(f"{f['where']}: {f['what']} [allowed: {allowed[f['key']]}]")
        else:
            bad += 1
            print(f"{f['where']}: {f['what']}")
    rel_allow = os.path.relpath(args.allow, args.root)
    for key in sorted(set(allowed) - used):
        errors.append(f"{rel_allow}: entry `{key}` matches nothing: remove it")
    for e in errors:
        print(e)
    if bad or errors:
        print(f"structure check: {bad} finding(s), {len(errors)} allow-list error(s)")
        return 1
    print(f"structure check: clean ({len(used)} allowed exception(s) listed in {rel_allow})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
