#!/usr/bin/env python3
"""Find text a user should never read: references to the internal specification ("SPEC §4"),
issue numbers ("issue #12", "issue 16", "#17's") and the history of the work ("since then",
"before this fix", "round 3") in the documentation and in the code's user-facing text.

Usage:
    python3 scripts/check_user_text.py            # README.md, CHANGELOG.md, docs/: exit 1 on any hit
    python3 scripts/check_user_text.py --code     # also list hits in the code (file:line): crates/*/
                                                  # {src,tests,examples,benches}, python/, scripts/, .ci/run
    python3 scripts/check_user_text.py --strict   # with --code: exit 1 on code hits too
    python3 scripts/check_user_text.py --self-test

Every hit is printed as `path:line: [kind] text`, so the list can drive a sweep of the code.
CHANGELOG.md is a history by design: only the specification and issue-number patterns apply
to it. docs/cli.md is generated from the binary's --help, so its hits are the code's: they are
always listed, and counted with the code's (failing only with --strict). Exit status: 0 clean,
1 hits (in the documentation, or anywhere with --strict), 2 usage error.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Generated from the code (`scripts/gen_cli_docs.sh`): fixed in the code, not in the file.
GENERATED = {ROOT / "docs" / "cli.md"}

# (kind, pattern). Case-insensitive.
REFERENCE_PATTERNS = [
    ("spec", re.compile(r"\bSPEC\s*(§|section\b|sec\.)", re.I)),
    ("spec", re.compile(r"\bSPEC\.md\b", re.I)),
    ("issue", re.compile(r"\bissues?\s*#?\s*\d+", re.I)),
    ("issue", re.compile(r"(?<![\w&/])#\d+'s\b")),
    ("issue", re.compile(r"\(#\d+\)")),
    ("issue", re.compile(r"\b(PR|pull request)\s*#\d+", re.I)),
]
HISTORY_PATTERNS = [
    ("history", re.compile(r"\bsince then\b", re.I)),
    ("history", re.compile(r"\bthis change('s)?\b", re.I)),
    ("history", re.compile(r"\bbefore this (fix|change|hardening|rerun|commit)\b", re.I)),
    ("history", re.compile(r"\bformerly\b", re.I)),
    ("history", re.compile(r"\bno longer\b(?! than)", re.I)),
    ("history", re.compile(r"\b(any ?more)\b", re.I)),
    ("history", re.compile(r"\bnot met\b", re.I)),
    ("history", re.compile(r"\b(round|attempt|try) \d+\b", re.I)),
    ("history", re.compile(r"\b(first|second|third|fourth) (round|attempt|try)\b", re.I)),
    ("history", re.compile(r"\bprevious (tables|run|version|round)s?\b", re.I)),
    ("history", re.compile(r"\bthe rerun\b", re.I)),
    ("history", re.compile(r"\bwe (tried|first|then)\b", re.I)),
    ("history", re.compile(r"\b(was|were) (tried|attempted)\b", re.I)),
    ("history", re.compile(r"\bfor now\b", re.I)),
    ("history", re.compile(r"\bnot yet\b", re.I)),
]
# Checked in the code only (the documentation is swept separately).
CODE_HISTORY_PATTERNS = [
    ("history", re.compile(r"\btoday'?s?\b", re.I)),
    ("history", re.compile(r"\bused to (be|give|allocate|panic|hang|return|print)\b", re.I)),
    ("history", re.compile(
        r"\b(first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth"
        r"|thirteenth|fourteenth|fifteenth|last|previous|this|\d+(st|nd|rd|th)) (work )?session\b",
        re.I)),
]

# Lines of code that carry user-facing or reader-facing text: comments, doc comments and
# string literals. (A blunt filter: any line with a comment marker or a quote.)
CODE_TEXT = re.compile(r"//|#|\"|'")


def doc_files() -> list[Path]:
    files = [ROOT / "README.md", ROOT / "CHANGELOG.md"]
    files += sorted((ROOT / "docs").rglob("*.md"))
    return [f for f in files if f.is_file()]


def code_files() -> list[Path]:
    """The code's text: the crates' sources, tests, examples and benches, the Python package
    and its tests, the scripts (this one excepted: its self-test quotes what it looks for) and
    the CI entry point."""
    out: list[Path] = []
    for sub in ("src", "tests", "examples", "benches"):
        for d in sorted((ROOT / "crates").glob(f"*/{sub}")):
            out += sorted(d.rglob("*.rs"))
    py = ROOT / "python"
    if py.is_dir():
        for ext in ("*.py", "*.rs", "*.pyi"):
            out += sorted(p for p in py.rglob(ext) if "target" not in p.parts)
    scripts = ROOT / "scripts"
    if scripts.is_dir():
        for ext in ("*.py", "*.sh", "*.txt"):
            out += sorted(p for p in scripts.rglob(ext) if p.resolve() != Path(__file__).resolve())
    ci = ROOT / ".ci" / "run"
    if ci.is_file():
        out.append(ci)
    return out


def in_fence_toggle(line: str) -> bool:
    return line.lstrip().startswith("```")


def scan_text(text: str, patterns) -> list[tuple[int, str, str]]:
    hits = []
    for n, line in enumerate(text.splitlines(), 1):
        for kind, pat in patterns:
            m = pat.search(line)
            if m:
                hits.append((n, kind, line.strip()))
                break
    return hits


def scan_doc(path: Path) -> list[tuple[int, str, str]]:
    patterns = REFERENCE_PATTERNS
    if path.name != "CHANGELOG.md":
        patterns = REFERENCE_PATTERNS + HISTORY_PATTERNS
    return scan_text(path.read_text(encoding="utf-8"), patterns)


def scan_code(path: Path) -> list[tuple[int, str, str]]:
    text = path.read_text(encoding="utf-8", errors="replace")
    hits = []
    for n, kind, line in scan_text(text, REFERENCE_PATTERNS + HISTORY_PATTERNS + CODE_HISTORY_PATTERNS):
        if CODE_TEXT.search(line):
            hits.append((n, kind, line))
    return hits


def report(path: Path, hits) -> None:
    rel = path.relative_to(ROOT)
    for n, kind, line in hits:
        print(f"{rel}:{n}: [{kind}] {line[:160]}")


def self_test() -> None:
    bad = [
        "the noise of SPEC §4",
        "see SPEC section 6",
        "issue #12 fixed it",
        "as issue 16 asked",
        "#17's shape",
        "Since then the run is faster",
        "before this fix, the sampler",
        "round 3 of the rerun",
        "(formerly 8 spaces)",
        "today's calibration",
        "it used to give no rows",
        "the fourteenth session measured",
    ]
    good = [
        "erratum 4.1: subsample-and-aggregate",
        "| # | where |",
        "see [the guarantees](guarantees.md#errata)",
        "an issue with the data",
        "no longer than 10 s",
        "the values used to choose the region",
        "a restarted session sees the spend",
    ]
    pats = REFERENCE_PATTERNS + HISTORY_PATTERNS + CODE_HISTORY_PATTERNS
    for s in bad:
        assert scan_text(s, pats), f"not caught: {s!r}"
    for s in good:
        assert not scan_text(s, pats), f"false positive: {s!r}"
    print("check_user_text: self-test passed")


def main(argv: list[str]) -> int:
    args = set(argv[1:])
    unknown = args - {"--code", "--strict", "--self-test"}
    if unknown:
        print(f"error: unknown argument(s) {sorted(unknown)}; valid: --code, --strict, --self-test",
              file=sys.stderr)
        return 2
    if "--self-test" in args:
        self_test()
    doc_hits = 0
    code_hits = 0
    for f in doc_files():
        hits = scan_doc(f)
        if f in GENERATED:
            code_hits += len(hits)
        else:
            doc_hits += len(hits)
        report(f, hits)
    if "--code" in args or "--strict" in args:
        for f in code_files():
            hits = scan_code(f)
            code_hits += len(hits)
            report(f, hits)
    print(
        f"check_user_text: {doc_hits} hit(s) in README/CHANGELOG/docs, {code_hits} in code"
        + ("" if ("--code" in args or "--strict" in args) else " (--help text in docs/cli.md only; --code for all)"),
        file=sys.stderr,
    )
    if doc_hits or ("--strict" in args and code_hits):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
