"""The tables benchmark's own schema map (python/benchmarks/tables_vs_diffprivlib.py) is the
map privpred applies, for every row map a schema may choose: numeric bounds with clip,
one-hot categories with an "other" slot, ignored columns, the scale (1/sqrt(m') or the
sphere) and the bias coordinate; and the benchmark runs end to end on one small table."""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest

from privpred import _native

from conftest import REPO

SCHEMA = {
    "privpred_schema": 1,
    "header": False,
    "columns": [
        {"name": "age", "type": "numeric", "min": 0, "max": 120},
        {"name": "dose", "type": "numeric", "min": 0, "max": 10, "out_of_bounds": "clip"},
        {"name": "id", "type": "ignore"},
        {"name": "colour", "type": "categorical", "categories": ["red", "green", "blue"]},
        {"name": "site", "type": "categorical", "categories": ["1", "2"], "unknown": "other"},
        {"name": "outcome", "type": "label", "classes": ["0", "1"]},
    ],
}


def bench():
    path = REPO / "python" / "benchmarks" / "tables_vs_diffprivlib.py"
    spec = importlib.util.spec_from_file_location("tables_vs_diffprivlib", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def rows(n, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        out.append([f"{rng.uniform(0, 120):.6g}", f"{rng.uniform(-5, 15):.6g}", "x7",
                    str(rng.choice(["red", "green", "blue"])), str(rng.choice(["1", "2.0", "3"])),
                    str(rng.integers(0, 2))])
    return out


MAPS = [None] + [{"range": r, "sphere": sp, "bias": bi}
                 for r in ("unit", "centered") for sp in (False, True) for bi in (False, True)]


@pytest.mark.parametrize("rowmap", MAPS)
def test_benchmark_map_equals_privpreds_map(rowmap):
    b = bench()
    r = rows(200)
    schema = dict(SCHEMA) if rowmap is None else {**SCHEMA, "map": rowmap}
    mapped, raw, lo, hi = b.schema_map(r, schema)
    bias = bool(rowmap and rowmap["bias"])
    # 2 numeric + 3 colours + 2 sites and the "other" slot (+ the bias coordinate)
    assert mapped.shape == (200, 8 + bias) and raw.shape == (200, 8)
    assert len(lo) == len(hi) == 8
    assert np.linalg.norm(mapped, axis=1).max() <= 1 + 1e-12
    enc, y = _native.encode_table(json.dumps(schema), r, [x[-1] for x in r])
    assert np.abs(np.asarray(enc, float) - mapped).max() < 1e-6
    assert b.privpred_mapping_diff(r, schema, mapped) < 1e-6
    assert list(np.asarray(y)) == list(b.labels(r, schema))


def test_benchmark_one_hot_slots():
    b = bench()
    r = rows(200)
    schema = {**SCHEMA, "map": {"range": "centered", "sphere": False, "bias": False}}
    mapped, _, _, _ = b.schema_map(r, schema)
    # "3" is no declared site: it falls into the "other" slot; "2.0" matches "2"
    s = 1 / np.sqrt(4)
    i3 = next(i for i, x in enumerate(r) if x[4] == "3")
    i2 = next(i for i, x in enumerate(r) if x[4] == "2.0")
    assert mapped[i3, 7] == pytest.approx(s) and mapped[i2, 6] == pytest.approx(s)


def test_benchmark_map_refuses_what_privpred_refuses():
    b = bench()
    bad_age = [["130", "1", "x", "red", "1", "0"]]
    with pytest.raises(ValueError, match="age"):
        b.schema_map(bad_age, SCHEMA)
    with pytest.raises(ValueError):
        _native.encode_table(json.dumps(SCHEMA), bad_age, ["0"])
    bad_colour = [["30", "1", "x", "pink", "1", "0"]]
    with pytest.raises(ValueError, match="colour"):
        b.schema_map(bad_colour, SCHEMA)
    with pytest.raises(ValueError):
        _native.encode_table(json.dumps(SCHEMA), bad_colour, ["0"])


def test_benchmark_runs_on_one_small_table(tmp_path):
    """The script end to end on iris (scikit-learn's copy) at 2 repetitions: every method of
    privpred at its defaults, the non-private references, and diffprivlib when it imports."""
    from conftest import cli_path

    b = bench()
    out = tmp_path / "iris.json"
    import sys

    argv = sys.argv
    sys.argv = ["tables_vs_diffprivlib.py", "--privpred", str(cli_path()), "--tables", "iris",
                "--repetitions", "2", "--json", str(out)]
    try:
        b.main()
    finally:
        sys.argv = argv
    res = json.loads(out.read_text())["iris"]
    assert res["n_train"] == 120 and res["n_test"] == 30
    pp = {(r["method"], r["epsilon"]) for r in res["rows"] if r["library"] == "privpred"}
    assert pp == {(m, e) for m in b.METHODS for e in b.EPSILONS}
    assert res["privpred_selection"]["protocol"] == "public-rule"
    assert res["mapping_max_abs_diff_vs_privpred"] < 1e-6
    assert 0.9 <= res["sklearn_schema"] <= 1.0
    if b.have_diffprivlib():
        assert any(r["library"] == "diffprivlib" for r in res["rows"])
    if b.have_diffprivlib():
        # GaussianNB at epsilon/2 (its replace-one guarantee matched) beside the nominal run
        nb = {(r["method"], r["epsilon"]) for r in res["rows"] if r["library"] == "diffprivlib"}
        assert {(b.GNB_MATCHED, e) for e in b.EPSILONS} <= nb
        assert {("GaussianNB", e) for e in b.EPSILONS} <= nb


def test_gaussiannb_audit_pair_is_a_replace_one_pair():
    """The diffprivlib GaussianNB audit's pair differs in exactly one row, same size, and that
    row changes class (the case parallel composition over classes does not cover)."""
    path = REPO / "python" / "benchmarks" / "audit_diffprivlib_gnb.py"
    spec = importlib.util.spec_from_file_location("audit_diffprivlib_gnb", path)
    audit = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(audit)
    (x, y), (x2, y2) = audit.pair()
    assert x.shape == x2.shape and y.shape == y2.shape
    changed = [i for i in range(len(y)) if y[i] != y2[i] or (x[i] != x2[i]).any()]
    assert changed == [0] and y[0] != y2[0]
    assert ((x >= 0) & (x <= 1)).all() and ((x2 >= 0) & (x2 <= 1)).all()
    # the event's test: a count at or above its threshold, a sum at or below
    out = np.array([[audit.N_PER_CLASS, 1.0, 0.0, 1.0, 0.0]])
    assert audit.in_event(out, (audit.N_PER_CLASS, 1.0, 0.0, None, None)).all()
    assert not audit.in_event(out, (None, 1.5, None, None, None)).any()
