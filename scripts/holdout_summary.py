#!/usr/bin/env python3
"""Summarises the hold-out measurements (stdlib only): the bias value and the draws per cross-validated λ.

Input: the JSON lines written by `cargo run --release -p privpred-study --example holdout --
bias ...` and `... -- cv ...` (one line per dataset × method × ε × bias × λ with the hold-out
accuracy of every private draw; the 10 % training hold-out, never the test set).

    python3 scripts/holdout_summary.py bias holdout-bias.jsonl
    python3 scripts/holdout_summary.py cv holdout-cv.jsonl

`bias`: per (dataset, method, ε) cell the best-λ mean hold-out accuracy of each bias value, the
rank of each bias value in the cell (1 = best, ties share the mean rank), the mean rank over
cells, and what each method loses at each bias value against its best one (points).
`cv`: for k private draws per λ, how far the λ picked by the mean of k draws falls below the
best λ (in mean hold-out accuracy, points), averaged over `SELECTIONS` simulated selections
(k of the pooled draws per λ without replacement, ties to the first λ, as cross-validation
does), per setting and on average.
"""
import json
import random
import sys
from collections import defaultdict

SELECTIONS = 2000
KS = [1, 2, 3, 5, 10, 20]


def mean(v):
    return sum(v) / len(v)


def std(v):
    m = mean(v)
    return (sum((x - m) ** 2 for x in v) / max(len(v) - 1, 1)) ** 0.5


def ranks(values):
    """1 = largest; ties share their mean rank."""
    order = sorted(range(len(values)), key=lambda i: -values[i])
    r = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and abs(values[order[j + 1]] - values[order[i]]) < 1e-12:
            j += 1
        for t in range(i, j + 1):
            r[order[t]] = (i + j) / 2 + 1
        i = j + 1
    return r


def load(path):
    return [json.loads(line) for line in open(path) if line.strip()]


def bias_mode(rows):
    cells = defaultdict(lambda: defaultdict(list))
    for r in rows:
        key = (r["dataset"], r["method"], r["epsilon"])
        cells[key][r["bias"]].append(r)
    biases = sorted({r["bias"] for r in rows})
    rank_sum = defaultdict(float)
    loss = defaultdict(lambda: defaultdict(list))
    print("| dataset | method | ε | " + " | ".join(f"v = {b:.3g}" for b in biases) + " |")
    print("|---|---|---|" + "---|" * len(biases))
    for key in sorted(cells, key=lambda k: (k[0] != "mnist", k[1], k[2])):
        best = {}
        text = []
        for b in biases:
            pts = cells[key][b]
            p = max(pts, key=lambda r: mean(r["accuracies"]))
            best[b] = mean(p["accuracies"]) * 100
            lam = "—" if p["lambda"] is None else f"{p['lambda']:g}"
            text.append(
                f"{best[b]:.1f} ± {std(p['accuracies']) * 100:.1f} (λ {lam}, {len(p['accuracies'])})"
            )
        rk = ranks([best[b] for b in biases])
        top = max(best.values())
        for b, x in zip(biases, rk):
            rank_sum[b] += x
            loss[key[1]][b].append(top - best[b])
        marks = [f"**{t}**" if best[b] == top else t for b, t in zip(biases, text)]
        print(f"| {key[0]} | {key[1]} | {key[2]:g} | " + " | ".join(marks) + " |")
    n = len(cells)
    print(f"\nmean rank over {n} cells: " + ", ".join(f"v = {b:.3g}: {rank_sum[b] / n:.2f}" for b in biases))
    print("\nmean loss against the best bias of each cell (points), per method:\n")
    print("| method | " + " | ".join(f"v = {b:.3g}" for b in biases) + " |")
    print("|---|" + "---|" * len(biases))
    allm = defaultdict(list)
    for m in sorted(loss):
        cols = []
        for b in biases:
            cols.append(f"{mean(loss[m][b]):.2f} (max {max(loss[m][b]):.2f})")
            allm[b] += loss[m][b]
        print(f"| {m} | " + " | ".join(cols) + " |")
    print("| all | " + " | ".join(f"{mean(allm[b]):.2f} (max {max(allm[b]):.2f})" for b in biases) + " |")


def cv_mode(rows):
    settings = defaultdict(list)
    for r in rows:
        settings[(r["dataset"], r["method"], r["epsilon"], r["bias"])].append(r)
    rng = random.Random(0)
    avg = defaultdict(lambda: defaultdict(list))
    print("| dataset | method | ε | bias | pool | best λ (mean %) | " + " | ".join(f"k = {k}" for k in KS) + " |")
    print("|---|---|---|---|---|---|" + "---|" * len(KS))
    for key in sorted(settings, key=lambda k: (k[1], k[0] != "mnist", k[2], k[3])):
        pts = sorted(settings[key], key=lambda r: r["lambda"])
        pools = [p["accuracies"] for p in pts]
        means = [mean(p) * 100 for p in pools]
        top = max(means)
        best_l = pts[means.index(top)]["lambda"]
        cols = []
        for k in KS:
            if k > min(len(p) for p in pools) // 2:
                cols.append("—")
                continue
            regret = 0.0
            for _ in range(SELECTIONS):
                s = [mean(rng.sample(p, k)) for p in pools]
                regret += top - means[s.index(max(s))]
            regret /= SELECTIONS
            cols.append(f"{regret:.2f}")
            avg[key[1]][k].append(regret)
        print(f"| {key[0]} | {key[1]} | {key[2]:g} | {key[3]:.3g} | {len(pools[0])} | {best_l:g} ({top:.1f}) | " + " | ".join(cols) + " |")
    print("\nmean loss of the pick against the best λ (points), per method:\n")
    print("| method | settings | " + " | ".join(f"k = {k}" for k in KS) + " |")
    print("|---|---|" + "---|" * len(KS))
    for m in sorted(avg):
        cols = [f"{mean(avg[m][k]):.2f}" if avg[m][k] else "—" for k in KS]
        print(f"| {m} | {len(avg[m][1])} | " + " | ".join(cols) + " |")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("bias", "cv"):
        sys.exit("usage: holdout_summary.py bias|cv FILE.jsonl")
    rows = load(sys.argv[2])
    (bias_mode if sys.argv[1] == "bias" else cv_mode)(rows)
