"""The Python code of the user docs runs as written (README.md, python/README.md,
docs/python.md, docs/tables.md), so that the docs cannot drift from the code.

Every ```` ```python ```` block runs, in its file's order and in one namespace per file (a
block may use what an earlier block of the same file defined), in a temporary working
directory. A block that needs something a test cannot provide says so in its info string:
``needs=serve`` (a running ``privpred serve``) is skipped with that reason; ``data=NAME``
names a data set of the CLI's cache, and the block is skipped (one ``privpred-test-skip:``
line) when it is absent, as every data-dependent test here.
"""

from __future__ import annotations

import os
import re
import warnings
from pathlib import Path

import pytest

from conftest import REPO, dataset_or_skip

DOCS = ["README.md", "python/README.md", "docs/python.md", "docs/tables.md"]

# what a `needs=` word stands for (the skip reason)
NEEDS = {"serve": "needs a running `privpred serve` at the address the block names"}

FENCE = re.compile(r"^```python(?P<info>[^\n]*)\n(?P<code>.*?)^```\s*$", re.M | re.S)


def blocks(doc: str):
    """(line, info attributes, code) of each python block of ``doc``."""
    text = (REPO / doc).read_text()
    out = []
    for m in FENCE.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        attrs = dict(a.split("=", 1) for a in m.group("info").split() if "=" in a)
        out.append((line, attrs, m.group("code")))
    return out


def test_every_doc_has_its_python_blocks():
    # the extraction itself: each file holds the blocks these tests run
    counts = {doc: len(blocks(doc)) for doc in DOCS}
    assert all(n >= 1 for n in counts.values()), counts
    for doc in DOCS:
        for line, attrs, _ in blocks(doc):
            unknown = set(attrs) - {"needs", "data"}
            assert not unknown, f"{doc}:{line}: unknown block attribute(s) {unknown}"
            assert attrs.get("needs", "serve") in NEEDS, f"{doc}:{line}: needs={attrs['needs']}"


@pytest.mark.parametrize("doc", DOCS)
def test_the_docs_python_blocks_run(doc, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": f"docs:{doc}"}
    skipped = []
    for line, attrs, code in blocks(doc):
        if "needs" in attrs:
            skipped.append(f"{doc}:{line}: {NEEDS[attrs['needs']]}")
            continue
        for name in filter(None, attrs.get("data", "").split(",")):
            dataset_or_skip(name, f"{doc}:{line}")
        with warnings.catch_warnings():  # a block may change the warning filters
            try:
                exec(compile(code, f"{doc}:{line}", "exec"), namespace)
            except Exception as e:  # name the block that failed
                raise AssertionError(f"the python block at {doc}:{line} failed: {e!r}") from e
    for s in skipped:
        print(f"skipped {s}")
    assert os.getcwd() == str(tmp_path)


def test_a_block_marked_needs_serve_is_the_clients_only():
    # blocks are skipped only for what a test cannot provide: the marked blocks hold a Client
    for doc in DOCS:
        for line, attrs, code in blocks(doc):
            if attrs.get("needs") == "serve":
                assert "Client(" in code, f"{doc}:{line} is marked needs=serve without a Client"


def test_the_fence_pattern_reads_info_strings():
    text = "a\n```python needs=serve\nx = 1\n```\n```python\ny = 2\n```\n```sh\nz\n```\n"
    found = [(m.group("info").split(), m.group("code")) for m in FENCE.finditer(text)]
    assert found == [(["needs=serve"], "x = 1\n"), ([], "y = 2\n")]
    assert Path(REPO / "docs/python.md").exists()
