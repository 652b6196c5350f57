"""The private schema draft from Python (``privpred.draft_schema``): the code of
``privpred data schema --epsilon`` (the same schema for the same seed), its cost recorded in
``drafted`` and charged to the odometer before anything is returned, bad parameters refused
by their Python names before any charge, and a fit on the drafted schema charged to the
draft's key."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import privpred
from privpred import odometer

from conftest import cli

HEADER = ["age", "income", "region", "outcome"]


def survey(n=3000, seed=1):
    """A survey table: two numeric columns, a categorical one and a two-class label."""
    rng = np.random.default_rng(seed)
    age = rng.integers(18, 78, size=n)
    income = 20000 + rng.integers(0, 60000, size=n)
    region = np.asarray(["north", "south", "east"])[rng.integers(0, 3, size=n)]
    outcome = np.where(age > 45, "yes", "no")
    return [[str(a), str(i), r, o] for a, i, r, o in zip(age, income, region, outcome)]


@pytest.fixture
def csv(tmp_path):
    p = tmp_path / "survey.csv"
    p.write_text("\n".join(",".join(r) for r in [HEADER] + survey()) + "\n")
    return p


DRAFT = dict(label="outcome", categorical=["region"])


def spent(odo, key):
    [rec] = odometer.show(odo, key)
    return rec


def test_the_cost_is_recorded_and_charged_and_a_draft_past_the_limit_returns_nothing(csv, tmp_path):
    odo = str(tmp_path / "odo.sqlite")
    odometer.set_limit(odo, 6.0, 1e-5, key="survey")
    s = privpred.draft_schema(csv, epsilon=4, delta=1e-6, odometer=odo, odometer_key="survey", **DRAFT)
    d = s["drafted"]
    assert (d["epsilon"], d["delta"]) == (4.0, 1e-6), d
    assert d["relation"] == "replace-one" and d["quantiles"] == [0.01, 0.99], d
    assert d["odometer_key"] == "survey" and "seed" not in d, d
    assert math.fsum(c["epsilon"] for c in d["columns"]) <= 4.0 * (1 + 1e-9)
    cols = {c["name"]: c for c in s["columns"]}
    assert [c["type"] for c in s["columns"]] == ["numeric", "numeric", "categorical", "label"]
    assert set(cols["region"]["categories"]) <= {"north", "south", "east"}
    assert set(cols["outcome"]["classes"]) <= {"no", "yes"}
    # the odometer is charged exactly the recorded cost, as a released draft
    rec = spent(odo, "survey")
    assert rec["spent"] == {"fits": 1, "epsilon": 4.0, "delta": 1e-6}, rec
    [fit] = rec["fits"]
    assert fit["method"] == "schema-draft" and fit["state"] == "released", fit
    assert (fit["epsilon"], fit["delta"]) == (4.0, 1e-6), fit
    # a second draft would pass the limit: refused, nothing returned, nothing charged
    with pytest.raises(ValueError, match="past the limit"):
        privpred.draft_schema(csv, epsilon=4, delta=1e-6, odometer=odo, odometer_key="survey", **DRAFT)
    assert spent(odo, "survey")["spent"]["fits"] == 1
    # the schema is one the estimator and the CLI read
    privpred.PrivateLogisticRegression(schema=s)  # accepted as a dict
    (tmp_path / "survey.schema.json").write_text(json.dumps(s))
    assert privpred._schema.load_schema(str(tmp_path / "survey.schema.json"))[1]["drafted"] == d


def test_the_same_code_as_the_cli_same_seed_same_schema_same_charge(csv, tmp_path):
    flags = ["--label", "outcome", "--categorical", "region", "--epsilon", "5", "--delta", "1e-6"]
    # a seeded draft is the CLI's, cell for cell: one mechanism, not a second copy
    out = cli("data", "schema", str(csv), *flags, "--seed", "7").stdout
    py = privpred.draft_schema(csv, epsilon=5, delta=1e-6, seed=7, **DRAFT)
    assert py == json.loads(out)
    assert py["drafted"]["seed"] == 7 and "odometer_key" not in py["drafted"]
    # charged drafts: the same key recorded and the same charge on the odometer
    odo = str(tmp_path / "odo.sqlite")
    odometer.set_limit(odo, 20.0, 1e-5, key="survey")
    out = cli("data", "schema", str(csv), *flags, "--odometer", odo, "--odometer-key", "survey").stdout
    by_cli = json.loads(out)
    by_py = privpred.draft_schema(csv, epsilon=5, delta=1e-6, odometer=odo, odometer_key="survey", **DRAFT)
    assert by_cli["drafted"] == by_py["drafted"], (by_cli["drafted"], by_py["drafted"])
    assert by_py["drafted"]["odometer_key"] == "survey"
    a, b = spent(odo, "survey")["fits"]
    same = ("method", "epsilon", "delta", "neighbours", "state")
    assert {k: a[k] for k in same} == {k: b[k] for k in same}, (a, b)


def test_a_dataframe_and_rows_draft_as_the_file_does(csv):
    pd = pytest.importorskip("pandas")
    by_file = privpred.draft_schema(csv, epsilon=5, delta=1e-6, seed=3, **DRAFT)
    by_rows = privpred.draft_schema([HEADER] + survey(), epsilon=5, delta=1e-6, seed=3, **DRAFT)
    by_frame = privpred.draft_schema(pd.read_csv(csv), epsilon=5, delta=1e-6, seed=3, **DRAFT)
    assert by_file == by_rows == by_frame
    # without a header the columns are column_0, …; the last one is the label by default
    s = privpred.draft_schema(survey(), header=False, epsilon=5, delta=1e-6, seed=3, categorical="column_2")
    assert [c["name"] for c in s["columns"]] == ["column_0", "column_1", "column_2", "column_3"]
    assert s["columns"][3]["type"] == "label"


def test_without_a_seed_the_draft_is_a_release_from_the_os_generator(csv):
    s = privpred.draft_schema(csv, epsilon=5, delta=1e-6, **DRAFT)
    assert "seed" not in s["drafted"] and "odometer_key" not in s["drafted"]


@pytest.mark.parametrize(
    "change, needle",
    [
        (dict(epsilon=0), "invalid epsilon = 0: must be a finite number > 0"),
        (dict(epsilon=-1), "invalid epsilon = -1: must be a finite number > 0"),
        (dict(epsilon=float("nan")), "invalid epsilon = NaN"),
        (dict(epsilon="1"), "invalid epsilon = '1'"),
        (dict(delta=None), "invalid delta = (none): required with epsilon"),
        (dict(delta=1.0), "invalid delta = 1: must be in (0, 1)"),
        (dict(delta=0.0), "invalid delta = 0: must be in (0, 1)"),
        (dict(quantile=0.7), "invalid quantile = 0.7: must be in (0, 0.5)"),
        (dict(quantile=0.0), "invalid quantile = 0: must be in (0, 0.5)"),
        (dict(categorical=["nope"]), "invalid categorical = nope"),
        (dict(ignore=["outcome"]), "invalid ignore = outcome"),
        (dict(label="z"), "invalid label = z"),
        (dict(seed=3), "seed 3 is refused with odometer"),
        (dict(seed=-1), "invalid seed = -1"),
        (dict(odometer_key=None), "invalid odometer_key = (none): required with odometer"),
        (dict(odometer_key=""), "invalid odometer key"),
    ],
)
def test_bad_parameters_are_refused_by_their_python_names_before_any_charge(csv, tmp_path, change, needle):
    odo = str(tmp_path / "odo.sqlite")
    odometer.set_limit(odo, 30.0, 1e-5, key="survey")
    kw = dict(epsilon=1.0, delta=1e-6, odometer=odo, odometer_key="survey", **DRAFT)
    kw.update(change)
    with pytest.raises(ValueError) as e:
        privpred.draft_schema(csv, **kw)
    msg = str(e.value)
    assert needle in msg, msg
    assert "--" not in msg, f"a command-line flag in a Python message: {msg}"
    assert spent(odo, "survey")["spent"]["fits"] == 0


def test_a_key_without_an_odometer_and_a_key_without_a_limit_are_refused(csv, tmp_path):
    with pytest.raises(ValueError, match="odometer_key"):
        privpred.draft_schema(csv, epsilon=1, delta=1e-6, odometer_key="survey", **DRAFT)
    odo = str(tmp_path / "odo.sqlite")
    odometer.set_limit(odo, 30.0, 1e-5, key="survey")
    with pytest.raises(ValueError, match="no limit"):
        privpred.draft_schema(csv, epsilon=1, delta=1e-6, odometer=odo, odometer_key="other", **DRAFT)
    assert spent(odo, "survey")["spent"]["fits"] == 0


def test_a_fit_on_the_drafted_schema_is_charged_to_the_drafts_key(csv, tmp_path):
    pd = pytest.importorskip("pandas")
    odo = str(tmp_path / "odo.sqlite")
    odometer.set_limit(odo, 10.0, 1e-5, key="survey")
    s = privpred.draft_schema(csv, epsilon=4, delta=1e-6, odometer=odo, odometer_key="survey", **DRAFT)
    df = pd.read_csv(csv)
    est = privpred.PrivateLogisticRegression(
        schema=s, method="model-sensitivity", epsilon=1.0, lam=1e-2, odometer=odo
    )
    est.fit(df[["age", "income", "region"]], df["outcome"])
    rec = spent(odo, "survey")
    assert rec["spent"]["fits"] == 2 and rec["spent"]["epsilon"] == 5.0, rec
    assert [f["method"] for f in rec["fits"]] == ["schema-draft", "model-sensitivity"]
