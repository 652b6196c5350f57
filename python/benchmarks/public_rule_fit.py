"""The measurements behind the schema's default row map and the public lambda rule.

For each public table of tables_vs_diffprivlib.py (one stratified 80/20 split, seed 0), each
row map (examples/NAME.schema.json with its "map" replaced) and each public lambda of a grid,
`privpred compare --lambda L` runs every method at epsilon in {0.1, 1, 10}; the teachers,
DP-SGD's batch size and DP-SGD's epochs are swept alongside. The result (JSON) is what the rule's constants
are fitted on (docs/tables.md): public tables only, never a user's.

    python python/benchmarks/public_rule_fit.py --privpred target/release/privpred \
        --part lambda --json python/benchmarks/public_rule_fit.json
    python python/benchmarks/public_rule_fit.py --privpred target/release/privpred \
        --part teachers,batch --maps unit-sphere --json python/benchmarks/public_rule_fit.json
    python python/benchmarks/public_rule_fit.py --privpred target/release/privpred \
        --part epochs --maps unit-sphere --repetitions 10 --json python/benchmarks/public_rule_fit.json
    python python/benchmarks/public_rule_fit.py --privpred target/release/privpred \
        --part lambda,rule,kappa --maps unit-sphere --json python/benchmarks/public_rule_fit.json
    python python/benchmarks/public_rule_fit.py summary python/benchmarks/public_rule_fit.json

(python/benchmarks/public_rule_fit.json holds the run docs/tables.md reports: 5 draws per
cell; the teachers and batch sweeps on the default map only; the DP-SGD epochs sweep, at the
rule's batch size and clip, with 10 draws per cell and each method's own loss as `compare`
picks it: the sigmoid on two classes.)
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
from sklearn.model_selection import train_test_split

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tables_vs_diffprivlib as tb  # noqa: E402

MAPS = {
    "centered": {"range": "centered", "sphere": False, "bias": False},
    "centered-bias": {"range": "centered", "sphere": False, "bias": True},
    "unit-bias": {"range": "unit", "sphere": False, "bias": True},
    "unit-sphere": {"range": "unit", "sphere": True, "bias": False},
    "unit-sphere-bias": {"range": "unit", "sphere": True, "bias": True},
    "centered-sphere-bias": {"range": "centered", "sphere": True, "bias": True},
}
LAMBDAS = [1e-5, 1e-4, 1e-3, 1e-2, 1e-1]
# loss perturbation's kappa in lambda = kappa*d*C/(N*eps) (the rule: 0.3)
KAPPAS = [0.03, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5]
# DP-SGD's epochs (the rule: 20 up to epsilon = 1, 20 * epsilon^0.4 above, at most 100)
EPOCHS = [20, 50, 100, 200]


def compare(binary, d, schema, reps, extra):
    eps = [] if "--epsilon" in extra else ["--epsilon", "0.1,1,10"]
    cmd = [binary, "compare", "--dataset", "csv:train.csv,test.csv", "--schema", schema,
           *eps, "--budget", "100", "--repetitions", str(reps), "--json", *extra]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=d)
    j = json.loads(out.stdout)
    rows = []
    for cell in j["grid"]["cells"]:
        for r in cell["results"]:
            rows.append({"method": r["method"], "epsilon": cell["setting"]["epsilon"],
                         "mean": r["mean"], "std": r["std"]})
    return rows, j["nonprivate_accuracy"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--privpred", default=os.path.join(tb.ROOT, "target", "release", "privpred"))
    ap.add_argument("--fair-csv", default=os.path.expanduser("~/.cache/privpred/fair/fair.csv"))
    ap.add_argument("--repetitions", type=int, default=5)
    ap.add_argument("--tables", default=",".join(t[0] for t in tb.TABLES))
    ap.add_argument("--maps", default=",".join(MAPS))
    ap.add_argument("--part", default="lambda,teachers,batch")
    ap.add_argument("--json", required=True)
    a = ap.parse_args()
    binary = os.path.abspath(a.privpred)
    out = json.load(open(a.json)) if os.path.exists(a.json) else {}
    for name, load in tb.TABLES:
        if name not in a.tables.split(","):
            continue
        rows = load(a)
        schema = json.load(open(os.path.join(tb.ROOT, "examples", f"{name}.schema.json")))
        y = tb.labels(rows, schema)
        itr, ite = train_test_split(np.arange(len(rows)), test_size=0.2, random_state=0,
                                    stratify=y)
        res = out.setdefault(name, {"n_train": len(itr), "classes": int(y.max() + 1),
                                    "test_majority": float(np.bincount(y[ite]).max() / len(ite))})
        with tempfile.TemporaryDirectory() as d:
            for part, idx in [("train", itr), ("test", ite)]:
                with open(os.path.join(d, f"{part}.csv"), "w", newline="") as f:
                    csv.writer(f, lineterminator="\n").writerows([rows[i] for i in idx])
            for mname in a.maps.split(","):
                sch = dict(schema, map=MAPS[mname])
                sp = os.path.join(d, f"{mname}.schema.json")
                json.dump(sch, open(sp, "w"))
                dim = tb.schema_map(rows[:1], sch)[0].shape[1]
                mres = res.setdefault("maps", {}).setdefault(mname, {"dim": dim})
                t_small = max(1, min(16, len(itr) // 10))
                b_small = min(32, int(0.9 * 0.9 * len(itr)))
                if "lambda" in a.part:
                    for lam in LAMBDAS:
                        r, nonpriv = compare(binary, d, sp, a.repetitions,
                                             ["--lambda", f"{lam:g}", "--teachers", str(t_small),
                                              "--dpsgd-batch-size", str(b_small)])
                        mres.setdefault("lambda", {})[f"{lam:g}"] = r
                        mres["nonprivate"] = nonpriv
                        print(name, mname, lam, [(x["method"][:6], x["epsilon"],
                                                  round(100 * x["mean"], 1)) for x in r
                                                 if x["method"] in ("loss-perturbation",
                                                                    "model-sensitivity")],
                              flush=True)
                if "kappa" in a.part:
                    # loss perturbation's constant: lambda = kappa*d*C/(N*eps) per epsilon
                    c_out = 1 if res["classes"] == 2 else res["classes"]
                    for kappa in KAPPAS:
                        for eps in [0.1, 1.0, 10.0]:
                            lam = min(max(kappa * dim * c_out / (len(itr) * eps), 1e-6), 1.0)
                            r, _ = compare(binary, d, sp, a.repetitions,
                                           ["--lambda", f"{lam:.6g}", "--epsilon", f"{eps:g}"])
                            mres.setdefault("kappa", {}).setdefault(f"{kappa:g}", []).extend(
                                x for x in r if x["method"] == "loss-perturbation")
                if "rule" in a.part:
                    # the public rule's own values: compare at its defaults
                    r, _ = compare(binary, d, sp, a.repetitions, [])
                    mres["rule"] = r
                if "teachers" in a.part:
                    for t in [2, 4, 8, 16, 32, 64, 128]:
                        if t > len(itr):
                            continue
                        r, _ = compare(binary, d, sp, a.repetitions,
                                       ["--teachers", str(t), "--dpsgd-batch-size", str(b_small)])
                        mres.setdefault("teachers", {})[str(t)] = [
                            x for x in r if x["method"] == "subsample-aggregate"]
                if "epochs" in a.part:
                    for e in EPOCHS:
                        r, _ = compare(binary, d, sp, a.repetitions,
                                       ["--dpsgd-epochs", f"{e:g}", "--delta", "1e-5"])
                        mres.setdefault("epochs", {})[f"{e:g}"] = [
                            x for x in r if x["method"] == "dp-sgd"]
                        print(name, mname, "epochs", e, [(x["epsilon"], round(100 * x["mean"], 1))
                                                         for x in r if x["method"] == "dp-sgd"],
                              flush=True)
                if "batch" in a.part:
                    for b, clip in itertools.product([8, 16, 32, 64, 128, 256], [0.1, 1.0]):
                        if b > int(0.9 * 0.9 * len(itr)):
                            continue
                        r, _ = compare(binary, d, sp, a.repetitions,
                                       ["--teachers", str(t_small), "--dpsgd-batch-size", str(b),
                                        "--clip", f"{clip:g}", "--delta", "1e-5"])
                        mres.setdefault("batch", {})[f"{b},{clip:g}"] = [
                            x for x in r if x["method"] == "dp-sgd"]
                tmp = a.json + ".tmp"
                json.dump(out, open(tmp, "w"), indent=1)
                os.replace(tmp, a.json)


def summary(path, mname="unit-sphere"):
    """The public rule against the best fixed lambda in hindsight and lambda = 0.01: the mean
    test accuracy over the tables and epsilons of each lambda method (from --part
    lambda,rule)."""
    out = json.load(open(path))
    tables = [t for t in out if mname in out[t].get("maps", {})
              and "rule" in out[t]["maps"][mname] and "lambda" in out[t]["maps"][mname]]
    print(f"tables: {', '.join(tables)}")
    print("| method | the rule | best fixed λ (its value) | λ = 0.01 |")
    print("|---|---|---|---|")
    for method in ["loss-perturbation", "model-sensitivity", "prediction-sensitivity"]:
        def mean(rows_of):
            v = [x["mean"] for t in tables for x in rows_of(out[t]["maps"][mname])
                 if x["method"] == method]
            return 100 * float(np.mean(v))
        rule = mean(lambda m: m["rule"])
        fixed = {lam: mean(lambda m, lam=lam: m["lambda"][lam])
                 for lam in out[tables[0]]["maps"][mname]["lambda"]}
        best = max(fixed, key=fixed.get)
        print(f"| {method} | {rule:.1f} | {fixed[best]:.1f} ({best}) | {fixed['0.01']:.1f} |")


def kappa_summary(path, mname="unit-sphere"):
    """Loss perturbation's mean test accuracy over the tables per kappa (from --part kappa)."""
    out = json.load(open(path))
    tables = [t for t in out if "kappa" in out[t].get("maps", {}).get(mname, {})]
    if not tables:
        return
    print("| κ | ε = 0.1 | ε = 1 | ε = 10 | mean |")
    print("|---|---|---|---|---|")
    for kappa in out[tables[0]]["maps"][mname]["kappa"]:
        per = [100 * float(np.mean([x["mean"] for t in tables
                                    for x in out[t]["maps"][mname]["kappa"][kappa]
                                    if x["epsilon"] == eps])) for eps in [0.1, 1.0, 10.0]]
        print(f"| {kappa} | " + " | ".join(f"{v:.1f}" for v in per) + f" | {np.mean(per):.1f} |")


def map_summary(path):
    """Each row map's mean test accuracy over the tables (from --part lambda): loss
    perturbation and model sensitivity at epsilon = 1 and 10, lambda the best of the grid for
    each cell, and the non-private reference."""
    out = json.load(open(path))
    print("| map | loss perturbation ε = 1 | ε = 10 | model sensitivity ε = 1 | ε = 10 | non-private |")
    print("|---|---|---|---|---|---|")
    for mname in MAPS:
        tables = [t for t in out if "lambda" in out[t].get("maps", {}).get(mname, {})]
        if len(tables) < len(out):
            continue
        cells = []
        for method, eps in itertools.product(["loss-perturbation", "model-sensitivity"], [1.0, 10.0]):
            per = [max(x["mean"] for rows in out[t]["maps"][mname]["lambda"].values() for x in rows
                       if x["method"] == method and x["epsilon"] == eps) for t in tables]
            cells.append(f"{100 * float(np.mean(per)):.1f}")
        nonpriv = 100 * float(np.mean([out[t]["maps"][mname]["nonprivate"] for t in tables]))
        print(f"| {mname} | " + " | ".join(cells) + f" | {nonpriv:.1f} |")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "summary":
        summary(sys.argv[2])
        kappa_summary(sys.argv[2])
        map_summary(sys.argv[2])
    else:
        main()
