"""privpred vs diffprivlib vs scikit-learn on six public tables, every method at its defaults.

The tables ship inside pip packages: breast-cancer, wine and iris from scikit-learn, fair and
anes96 from statsmodels (fair as `privpred data fetch fair` derives it: affairs > 0; the
installed CSV in ~/.cache/privpred/fair, or --fair-csv, when there), and palmerpenguins (the
rows without a missing value). One stratified 80/20 split (seed 0) of each table is written
as two CSV files (no header) and used by every library; examples/NAME.schema.json (public
bounds written from each table's documentation, or the next power of ten above a
measurement's unit range) maps the rows for all of them.

- privpred: `privpred compare --dataset csv:train.csv,test.csv --schema examples/NAME.schema.json
  --epsilon 0.1,1,10 --budget B --repetitions R --json`, no other flag: lambda, the teachers
  T, DP-SGD's batch size and clip come from the public rule (privpred_core::public_rule; they
  cost nothing). Run once with delta = 0 (every method but DP-SGD) and once with
  delta = 1e-5 (DP-SGD's row).
- diffprivlib, as documented: `LogisticRegression(epsilon, data_norm=1)` (its defaults
  otherwise: C = 1, an intercept) on the same schema-mapped rows, and
  `GaussianNB(epsilon, bounds)` on the raw features: the numeric columns clipped to the
  schema's bounds, each categorical column as its one-hot indicators with bounds [0, 1].
  GaussianNB runs twice: at its nominal epsilon, which is 2 * epsilon under replace-one
  neighbours (audit_diffprivlib_gnb.py), and at epsilon / 2, the same guarantee as the other
  columns ("GaussianNB (epsilon/2)"). R fresh fits each. Skipped when diffprivlib does not import (0.6.6 needs scikit-learn < 1.7).
- privpred's non-private reference: compare's own (lambda chosen on a hold-out) and
  `privpred train non-private --lambda 0.01` scored by `privpred evaluate`.
- scikit-learn (non-private): `LogisticRegression` on the schema-mapped rows, lambda chosen on
  a 10 % hold-out of the training split from the grid below (as privpred's non-private
  reference chooses its own), and, default C = 1, on per-feature min-max scaling of the
  training data (a statistic of the data, for reference only).

The script's schema map is checked against privpred's own (privpred._native.encode_table,
when the privpred Python package is importable): the largest entry difference is printed and
written to the JSON.

    python python/benchmarks/tables_vs_diffprivlib.py --privpred target/release/privpred \
        [--repetitions 10] [--budget 100] [--tables iris,...] [--json out.json]
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import subprocess
import tempfile
import time
import warnings

import numpy as np
from sklearn.datasets import load_breast_cancer, load_wine
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split

# the non-private scikit-learn reference's hold-out grid (privpred's own grid)
LAMBDA_GRID = [1e-5, 5e-5, 1e-4, 5e-4, 1e-3, 5e-3, 1e-2, 5e-2, 1e-1, 5e-1]
# the fixed L2 strength privpred used before the public rule (the non-private reference at it)
PUBLIC_LAMBDA = 0.01
EPSILONS = [0.1, 1.0, 10.0]
DPSGD_DELTA = 1e-5
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
METHODS = ["model-sensitivity", "loss-perturbation", "prediction-sensitivity",
           "subsample-aggregate", "dp-sgd"]


def sklearn_table(loader):
    X, y = loader(return_X_y=True)
    return [[f"{v:.10g}" for v in row] + [str(int(c))] for row, c in zip(X, y)]


def fair_table(path):
    """Fair's survey as `privpred data fetch fair` installs it (affairs_any = affairs > 0):
    the installed CSV when it is there, else derived the same way from statsmodels' copy."""
    if path and os.path.exists(path):
        with open(path, newline="") as f:
            rows = list(csv.reader(f))
        return rows[1:] if rows and not _is_number(rows[0][0]) else rows
    import statsmodels.api as sm

    d = sm.datasets.fair.load_pandas().data
    return [[f"{v:.10g}" for v in r[:8]] + ["1" if r[8] > 0 else "0"]
            for r in d.itertuples(index=False)]


def anes96_table(_):
    """statsmodels' anes96 (944 rows): the vote (0 Clinton, 1 Dole) is the label."""
    import statsmodels.api as sm

    d = sm.datasets.anes96.load_pandas().data
    return [[f"{v:.10g}" if k != "vote" else str(int(v)) for k, v in zip(d.columns, r)]
            for r in d.itertuples(index=False)]


def penguins_table(_):
    """palmerpenguins (344 rows; the 11 with a missing value are dropped: 333 rows)."""
    import palmerpenguins

    d = palmerpenguins.load_penguins().dropna()
    cols = ["species", "island", "bill_length_mm", "bill_depth_mm", "flipper_length_mm",
            "body_mass_g", "sex", "year"]
    return [[v if isinstance(v, str) else f"{v:.10g}" for v in r]
            for r in d[cols].itertuples(index=False)]


def iris_table(_):
    from sklearn.datasets import load_iris

    return sklearn_table(load_iris)


# name, rows loader (each table's schema is examples/NAME.schema.json)
TABLES = [
    ("breast-cancer", lambda a: sklearn_table(load_breast_cancer)),
    ("wine", lambda a: sklearn_table(load_wine)),
    ("iris", iris_table),
    ("fair", lambda a: fair_table(a.fair_csv)),
    ("anes96", anes96_table),
    ("penguins", penguins_table),
]


def _is_number(s):
    try:
        return math.isfinite(float(s))
    except ValueError:
        return False


def _position(values, cell):
    """A cell's index in a public list: exactly, or as the same number (`1` and `1.0`)."""
    if cell in values:
        return values.index(cell)
    if _is_number(cell):
        v = float(cell)
        for i, c in enumerate(values):
            if _is_number(c) and float(c) == v:
                return i
    return None


def _label_index(schema):
    return next(i for i, c in enumerate(schema["columns"]) if c["type"] == "label")


def labels(rows, schema):
    li = _label_index(schema)
    classes = schema["columns"][li]["classes"]
    out = [_position(classes, r[li]) for r in rows]
    if any(c is None for c in out):
        raise ValueError("a label is not among the schema's classes")
    return np.array(out)


DEFAULT_MAP = {"range": "unit", "sphere": True, "bias": False}


def schema_map(rows, schema):
    """The schema's map into the unit ball, as docs/tables.md describes it.

    With m the number of numeric and categorical columns (m' = m + 1 with a bias coordinate),
    a numeric value x (clipped into [min, max] where declared, refused otherwise) becomes
    (x - min)/(max - min) (range "unit") or (2x - min - max)/(max - min) (range "centered"),
    a categorical value its one-hot vector (one extra "other" slot when declared); the row's
    entries v are then scaled to norm sqrt(m/m') / (1 + 1e-9) (sphere; left at 0 when v = 0)
    or multiplied by 1/sqrt(m'), and a bias coordinate 1/sqrt(m') is appended when declared.
    Returns the mapped rows and the raw design matrix (numeric values clipped to their
    bounds, categorical columns one-hot) with its bounds, which GaussianNB and the min-max
    reference use.
    """
    cols = schema["columns"]
    rmap = {**DEFAULT_MAP, **schema.get("map", {})}
    m = sum(c["type"] in ("numeric", "categorical") for c in cols)
    mp = m + bool(rmap["bias"])
    mapped, raw, lo, hi = [], [], [], []
    for c in cols:
        if c["type"] == "numeric":
            lo.append(c["min"])
            hi.append(c["max"])
        elif c["type"] == "categorical":
            k = len(c["categories"]) + (c.get("unknown") == "other")
            lo += [0.0] * k
            hi += [1.0] * k
    for n, row in enumerate(rows):
        z, r = [], []
        for c, cell in zip(cols, row):
            if c["type"] == "numeric":
                x, a, b = float(cell), c["min"], c["max"]
                if not a <= x <= b:
                    if c.get("out_of_bounds", "refuse") != "clip":
                        raise ValueError(f"row {n}: column {c['name']}: {x} outside [{a}, {b}]")
                    x = min(max(x, a), b)
                if rmap["range"] == "centered":
                    z.append(min(max((2 * x - a - b) / (b - a), -1.0), 1.0))
                else:
                    z.append(min(max((x - a) / (b - a), 0.0), 1.0))
                r.append(x)
            elif c["type"] == "categorical":
                cats = c["categories"]
                other = c.get("unknown") == "other"
                i = _position(cats, cell)
                if i is None:
                    if not other:
                        raise ValueError(f"row {n}: column {c['name']}: unknown category {cell}")
                    i = len(cats)
                onehot = [0.0] * (len(cats) + other)
                onehot[i] = 1.0
                z += onehot
                r += onehot
        if rmap["sphere"]:
            norm = math.sqrt(sum(v * v for v in z))
            s = math.sqrt(m / mp) / ((1 + 1e-9) * norm) if norm > 0 else 0.0
        else:
            s = 1.0 / math.sqrt(mp)
        z = [v * s for v in z]
        if rmap["bias"]:
            z.append(1.0 / math.sqrt(mp))
        mapped.append(z)
        raw.append(r)
    return np.array(mapped), np.array(raw), np.array(lo, float), np.array(hi, float)


def privpred_mapping_diff(rows, schema, mapped):
    """Largest |entry| difference between this script's map and privpred's own, or None."""
    try:
        from privpred import _native
    except ImportError:
        return None
    li = _label_index(schema)
    enc, _ = _native.encode_table(json.dumps(schema), [list(r) for r in rows],
                                  [r[li] for r in rows])
    enc = np.asarray(enc, dtype=float)
    if enc.shape != mapped.shape:
        raise ValueError(f"privpred maps to {enc.shape}, this script to {mapped.shape}")
    return float(np.abs(enc - mapped).max())


def privpred_runs(binary, workdir, schema_path, reps, budget, delta):
    """`privpred compare` at its defaults: lambda, T, DP-SGD's batch and clip by the public rule."""
    # relative paths: compare's seeds are labelled with the --dataset text, so the same
    # text (not a random temporary path) gives the same numbers on every run
    return privpred_compare(binary, workdir, "csv:train.csv,test.csv", schema_path, reps,
                            budget, delta)


def privpred_compare(binary, workdir, dataset, schema_path, reps, budget, delta, extra=()):
    """`privpred compare --dataset DATASET [--schema S]` at its defaults, as JSON."""
    schema = ["--schema", schema_path] if schema_path else []
    cmd = [binary, "compare", "--dataset", dataset, *schema, *extra,
           "--epsilon", ",".join(f"{e:g}" for e in EPSILONS), "--budget", str(budget),
           "--delta", f"{delta:g}", "--repetitions", str(reps), "--json"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=workdir)
    j = json.loads(out.stdout)
    rows, settings = {}, {}
    for cell in j["grid"]["cells"]:
        eps = cell["setting"]["epsilon"]
        for r in cell["results"]:
            rows[(r["method"], eps)] = (r["mean"], r["std"])
            ex = r.get("example", {})
            settings[(r["method"], eps)] = {k: ex.get(k) for k in (
                "lambda", "teachers", "clip", "noise_multiplier", "loss", "dim")}
    return rows, j["nonprivate_accuracy"], j["selection"], settings


def privpred_nonprivate_public(binary, workdir, schema_path):
    """privpred's own non-private model at the fixed lambda = 0.01 (the default before the rule)."""
    data = ["--dataset", "csv:train.csv,test.csv", "--schema", schema_path]
    subprocess.run([binary, "train", "non-private", "--lambda", f"{PUBLIC_LAMBDA:g}", *data,
                    "--out", "nonprivate.safetensors"], check=True, capture_output=True, cwd=workdir)
    out = subprocess.run([binary, "evaluate", "--model", "nonprivate.safetensors", *data, "--json"],
                         check=True, capture_output=True, text=True, cwd=workdir)
    return json.loads(out.stdout)["accuracy"]["mean"]


def have_diffprivlib():
    try:
        import diffprivlib  # noqa: F401
    except Exception:  # noqa: BLE001 -- diffprivlib 0.6.6 fails to import with scikit-learn >= 1.7
        return False
    return True


def dpl_logreg(Xtr, ytr, Xte, yte, eps, reps, seed):
    """diffprivlib's LogisticRegression as documented: its defaults (C = 1, an intercept)
    with data_norm = 1, the bound the schema's map guarantees."""
    from diffprivlib.models import LogisticRegression as DPLR

    accs = [DPLR(epsilon=eps, data_norm=1.0, random_state=seed + r).fit(Xtr, ytr)
            .score(Xte, yte) for r in range(reps)]
    return float(np.mean(accs)), float(np.std(accs, ddof=1))


def sk_logreg(Xtr, ytr, Xte, yte, seed=0, grid=LAMBDA_GRID):
    """Non-private scikit-learn, lambda chosen on a 10 % hold-out of the training split."""
    Xa, Xh, ya, yh = train_test_split(Xtr, ytr, test_size=0.1, random_state=seed, stratify=ytr)
    best = max(grid, key=lambda lam: LogisticRegression(C=1.0 / (lam * len(Xa)), max_iter=10000)
               .fit(Xa, ya).score(Xh, yh))
    acc = LogisticRegression(C=1.0 / (best * len(Xtr)), max_iter=10000).fit(Xtr, ytr).score(Xte, yte)
    return acc, best


# GaussianNB composes its classes in parallel, which holds for add/remove neighbours only: a
# replaced row that changes class moves two classes' counts, sums and squared deviations, so
# GaussianNB(epsilon) is 2*epsilon-DP under replace-one neighbours (audit_diffprivlib_gnb.py
# refutes epsilon on a worst-case pair). At epsilon/2 it gives the epsilon every other column
# gives; this row is the comparison at the same guarantee, the nominal one is kept beside it.
GNB_MATCHED = "GaussianNB (epsilon/2)"


def dpl_nb(Xtr, ytr, Xte, yte, lo, hi, eps, reps, seed):
    from diffprivlib.models import GaussianNB

    accs = [GaussianNB(epsilon=eps, bounds=(lo, hi), random_state=seed + r)
            .fit(Xtr, ytr).score(Xte, yte) for r in range(reps)]
    return float(np.mean(accs)), float(np.std(accs, ddof=1))


def versions(binary):
    import sklearn

    pv = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout.strip()
    out = {"privpred": pv, "scikit-learn": sklearn.__version__, "numpy": np.__version__}
    if have_diffprivlib():
        import diffprivlib

        out["diffprivlib"] = diffprivlib.__version__
    return out


def privpred_both_deltas(run):
    """`run(delta)` at delta = 0 for every method but DP-SGD, and at DPSGD_DELTA for DP-SGD:
    the accuracies, the non-private accuracy, the selection and the settings."""
    pp, nonpriv, selection, settings = run(0.0)
    pp_d, _, _, settings_d = run(DPSGD_DELTA)
    pp.update({k: v for k, v in pp_d.items() if k[0] == "dp-sgd"})
    settings.update({k: v for k, v in settings_d.items() if k[0] == "dp-sgd"})
    return pp, nonpriv, selection, settings


def result_record(*, ytr, yte, feature_dim, classes, repetitions, privpred, sklearn,
                  mapping_diff, nonprivate_public, sklearn_minmax, baselines):
    """One task's result, as the JSON holds it: `privpred` is privpred_both_deltas' tuple,
    `sklearn` (accuracy, hold-out lambda), `baselines` the diffprivlib methods as
    (name, eps -> (mean, std)), run when diffprivlib imports."""
    pp, nonpriv, selection, settings = privpred
    sk, sk_lam = sklearn
    res = {"n_train": len(ytr), "n_test": len(yte), "feature_dim": feature_dim,
           "classes": classes, "repetitions": repetitions,
           "test_majority": float(np.bincount(yte).max() / len(yte)),
           "dpsgd_delta": DPSGD_DELTA, "privpred_selection": selection,
           "privpred_settings": [{"method": k[0], "epsilon": k[1], **v}
                                 for k, v in sorted(settings.items())],
           "mapping_max_abs_diff_vs_privpred": mapping_diff,
           "privpred_nonprivate": nonpriv, "privpred_nonprivate_lambda_0.01": nonprivate_public,
           "sklearn_schema": sk, "sklearn_schema_lambda": sk_lam,
           "sklearn_minmax": sklearn_minmax, "rows": []}
    for eps in EPSILONS:
        for m in METHODS:
            if (m, eps) in pp:
                mean, std = pp[(m, eps)]
                res["rows"].append({"library": "privpred", "method": m, "epsilon": eps,
                                    "mean": mean, "std": std})
        if not have_diffprivlib():
            continue
        for method, fit in baselines:
            mean, std = fit(eps)
            res["rows"].append({"library": "diffprivlib", "method": method,
                                "epsilon": eps, "mean": mean, "std": std})
    return res


def run_table(a, name, rows):
    schema_path = os.path.join(ROOT, "examples", f"{name}.schema.json")
    schema = json.load(open(schema_path))
    y = labels(rows, schema)
    itr, ite = train_test_split(np.arange(len(rows)), test_size=0.2, random_state=0, stratify=y)
    tr, te = [rows[i] for i in itr], [rows[i] for i in ite]
    ytr, yte = y[itr], y[ite]
    with tempfile.TemporaryDirectory() as d:
        for part, rs in [("train", tr), ("test", te)]:
            with open(os.path.join(d, f"{part}.csv"), "w", newline="") as f:
                csv.writer(f, lineterminator="\n").writerows(rs)
        binary = os.path.abspath(a.privpred)
        run = lambda delta: privpred_runs(binary, d, schema_path, a.repetitions,  # noqa: E731
                                          a.budget, delta)
        pp = privpred_both_deltas(run)
        nonpriv_pub = privpred_nonprivate_public(binary, d, schema_path)
    Mtr, Rtr, lo, hi = schema_map(tr, schema)
    Mte, Rte, _, _ = schema_map(te, schema)
    diff = privpred_mapping_diff(tr + te, schema, np.vstack([Mtr, Mte]))
    mn, mx = Rtr.min(0), Rtr.max(0)
    span = np.where(mx > mn, mx - mn, 1.0)
    sk_mm = LogisticRegression(max_iter=10000).fit((Rtr - mn) / span, ytr).score(
        (np.clip(Rte, mn, mx) - mn) / span, yte)
    return result_record(
        ytr=ytr, yte=yte, feature_dim=Mtr.shape[1], classes=int(y.max() + 1),
        repetitions=a.repetitions, privpred=pp, sklearn=sk_logreg(Mtr, ytr, Mte, yte),
        mapping_diff=diff, nonprivate_public=nonpriv_pub, sklearn_minmax=sk_mm,
        baselines=[
            ("LogisticRegression",
             lambda eps: dpl_logreg(Mtr, ytr, Mte, yte, eps, a.repetitions, 0)),
            ("GaussianNB",
             lambda eps: dpl_nb(np.clip(Rtr, lo, hi), ytr, np.clip(Rte, lo, hi), yte, lo, hi,
                                eps, a.repetitions, 0)),
            (GNB_MATCHED,
             lambda eps: dpl_nb(np.clip(Rtr, lo, hi), ytr, np.clip(Rte, lo, hi), yte, lo, hi,
                                eps / 2, a.repetitions, 0)),
        ])


# MNIST as `privpred compare --dataset mnist` reads it: pixels / 255, each row scaled to unit
# length (no schema); the binary task is digits 0-4 (label 0) against 5-9 (label 1), given
# to privpred as an IDX directory with the labels rewritten. Pinned SHA-256 of the raw files.
MNIST_FILES = {
    "train-images-idx3-ubyte": "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db",
    "train-labels-idx1-ubyte": "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5",
    "t10k-images-idx3-ubyte": "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7",
    "t10k-labels-idx1-ubyte": "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2",
}
IMAGE_TASKS = ["mnist-binary", "mnist"]
# the scikit-learn reference's hold-out grid on MNIST (a shorter one: each fit takes a minute)
IMAGE_LAMBDA_GRID = [1e-5, 1e-4, 1e-3]


def _read_idx(path):
    import hashlib

    raw = open(path, "rb").read()
    want = MNIST_FILES[os.path.basename(path)]
    if hashlib.sha256(raw).hexdigest() != want:
        raise ValueError(f"{path}: SHA-256 is not the pinned {want}")
    ndim = raw[3]
    shape = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(shape)


def mnist_arrays(mnist_dir):
    Xtr = _read_idx(os.path.join(mnist_dir, "train-images-idx3-ubyte")).reshape(60000, -1)
    ytr = _read_idx(os.path.join(mnist_dir, "train-labels-idx1-ubyte")).astype(int)
    Xte = _read_idx(os.path.join(mnist_dir, "t10k-images-idx3-ubyte")).reshape(10000, -1)
    yte = _read_idx(os.path.join(mnist_dir, "t10k-labels-idx1-ubyte")).astype(int)
    unit = lambda X: (X / 255.0) / np.maximum(np.linalg.norm(X / 255.0, axis=1, keepdims=True), 1e-12)  # noqa: E731
    return unit(Xtr), ytr, unit(Xte), yte


def run_image(a, name):
    """MNIST (10 classes) or its binary task: privpred compare at its defaults, diffprivlib's
    LogisticRegression as documented and scikit-learn's non-private one, on the same rows."""
    Xtr, ytr, Xte, yte = mnist_arrays(a.mnist_dir)
    reps = a.image_repetitions
    binary = os.path.abspath(a.privpred)
    with tempfile.TemporaryDirectory() as d:
        if name == "mnist-binary":
            ytr, yte = (ytr >= 5).astype(int), (yte >= 5).astype(int)
            idx = os.path.join(d, "mnist-binary")
            os.mkdir(idx)
            for f in MNIST_FILES:
                src = os.path.join(a.mnist_dir, f)
                if "labels" in f:
                    lab = _read_idx(src) >= 5
                    with open(os.path.join(idx, f), "wb") as out:
                        out.write(bytes([0, 0, 8, 1]) + len(lab).to_bytes(4, "big")
                                  + lab.astype(np.uint8).tobytes())
                else:
                    os.symlink(src, os.path.join(idx, f))
            dataset = "idx:mnist-binary"
        else:
            dataset = "mnist"
        run = lambda delta: privpred_compare(binary, d, dataset, None, reps, a.budget,  # noqa: E731
                                             delta)
        pp = privpred_both_deltas(run)
    return result_record(
        ytr=ytr, yte=yte, feature_dim=Xtr.shape[1], classes=int(ytr.max() + 1),
        repetitions=reps, privpred=pp,
        sklearn=sk_logreg(Xtr, ytr, Xte, yte, grid=IMAGE_LAMBDA_GRID),
        mapping_diff=None, nonprivate_public=float("nan"), sklearn_minmax=float("nan"),
        baselines=[("LogisticRegression",
                    lambda eps: dpl_logreg(Xtr, ytr, Xte, yte, eps, reps, 0))])


def print_table(name, res):
    print(f"\n## {name} (train {res['n_train']}, test {res['n_test']}, "
          f"majority {100 * res['test_majority']:.1f} %)")
    print(f"non-private: privpred {res['privpred_nonprivate']:.4f} (hold-out lambda), "
          f"{res['privpred_nonprivate_lambda_0.01']:.4f} (lambda 0.01), scikit-learn (schema map, "
          f"hold-out lambda {res['sklearn_schema_lambda']:g}) {res['sklearn_schema']:.4f}, "
          f"scikit-learn (min-max of the data) {res['sklearn_minmax']:.4f}; "
          f"map vs privpred: max |diff| {res['mapping_max_abs_diff_vs_privpred']}")
    print("| library | method | ε = 0.1 | ε = 1 | ε = 10 |")
    print("|---|---|---|---|---|")
    keys = []
    for r in res["rows"]:
        if (r["library"], r["method"]) not in keys:
            keys.append((r["library"], r["method"]))
    keys.sort(key=lambda k: (k[0] != "privpred", METHODS.index(k[1]) if k[1] in METHODS else 0))
    for lib, m in keys:
        cells = []
        for eps in EPSILONS:
            r = [x for x in res["rows"] if (x["library"], x["method"], x["epsilon"]) == (lib, m, eps)]
            cells.append(f"{100 * r[0]['mean']:.1f} ± {100 * r[0]['std']:.1f}" if r else "–")
        print(f"| {lib} | {m} | " + " | ".join(cells) + " |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--privpred", default=os.path.join(ROOT, "target", "release", "privpred"))
    ap.add_argument("--fair-csv", default=os.path.expanduser("~/.cache/privpred/fair/fair.csv"))
    ap.add_argument("--repetitions", type=int, default=10)
    ap.add_argument("--budget", type=int, default=100)
    ap.add_argument("--tables", default=",".join(t[0] for t in TABLES))
    ap.add_argument("--mnist-dir", default=os.path.expanduser("~/.cache/privpred/mnist"))
    ap.add_argument("--image-repetitions", type=int, default=10,
                    help="repetitions on mnist-binary and mnist (each fit is slower)")
    ap.add_argument("--json")
    a = ap.parse_args()
    warnings.filterwarnings("ignore")
    results = {"settings": {"epsilons": EPSILONS, "budget": a.budget,
                            "repetitions": a.repetitions, "split": "stratified 80/20, seed 0",
                            "date": time.strftime("%Y-%m-%d"),
                            "versions": versions(a.privpred)}}
    wanted = a.tables.split(",")
    unknown = set(wanted) - {t[0] for t in TABLES} - set(IMAGE_TASKS)
    if unknown:
        ap.error(f"--tables: unknown {sorted(unknown)}; known: "
                 + ", ".join([t[0] for t in TABLES] + IMAGE_TASKS))
    if a.json and os.path.exists(a.json):
        # a run on some tables keeps the others' results
        old = json.load(open(a.json))
        results = {**{k: v for k, v in old.items() if k != "settings"}, **results}
    jobs = [(n, lambda n=n, load=load: run_table(a, n, load(a))) for n, load in TABLES]
    jobs += [(n, lambda n=n: run_image(a, n)) for n in IMAGE_TASKS]
    for name, job in jobs:
        if name not in wanted:
            continue
        res = job()
        results[name] = res
        print_table(name, res)
        if a.json:
            tmp = a.json + ".tmp"
            with open(tmp, "w") as f:
                json.dump(results, f, indent=1)
            os.replace(tmp, a.json)


if __name__ == "__main__":
    main()
