#!/usr/bin/env python3
"""Tables, findings evidence, time and differences of a study run.

    scripts/study_tables.py RUN_DIR [--previous DOC.md] [--log RUN.log] > tables.md

RUN_DIR is the `--out` directory of `privpred reproduce all …` (or of one figure): its
summary.csv gives every (figure, calibration, series, x) mean and std, its timings.jsonl the
thread-seconds per group. Writes markdown to stdout:

1. per figure and calibration mode, mean ± std test accuracy (%) of every setting;
2. the evidence behind each published finding of docs/study.md (best method per setting, the B where
   loss perturbation overtakes subsample-and-aggregate, how often DP-SGD is best, where
   prediction sensitivity ranks) per calibration mode — the verdicts are written by hand from it;
3. thread-seconds per figure and method (timings.jsonl), and with --log (stderr of the run
   with each line prefixed by a Unix time, as scripts/rerun_study.sh writes it) the wall time
   of each figure;
4. with --previous, the differences against the tables of an earlier docs/study.md (matched by
   figure, calibration mode, row and column): mean and largest |Δ| in points per table, and
   mean, smallest and largest Δ per method.

Standard library only. Nothing here decides a result: it only reads what the run wrote.
"""

import argparse
import collections
import csv
import json
import os
import re
import sys

FIGURES = ["fig1a", "fig1b", "fig2a", "fig2b", "fig3", "fig4", "fig5a", "fig5b", "fig6a", "fig6b"]
MODES = ["paper", "corrected", "tight"]
AXIS = {
    "fig1a": "epsilon", "fig1b": "epsilon", "fig2a": "B", "fig2b": "B", "fig3": "delta",
    "fig4": "n", "fig5a": "D", "fig5b": "C", "fig6a": "lambda", "fig6b": "T",
}


def load_summary(run_dir):
    """{(figure, mode): {"x": [..], "series": [..], "cell": {(x, s): (mean, std, n)}, "np": {x: v}}}"""
    tables = {}
    with open(os.path.join(run_dir, "summary.csv"), newline="") as f:
        for r in csv.DictReader(f):
            key = (r["figure"], r["calibration"])
            t = tables.setdefault(key, {"x": [], "series": [], "cell": {}, "np": {}, "idx": {}})
            x = fmt_x(r["x"])
            if x not in t["x"]:
                t["x"].append(x)
                t["idx"][x] = int(r["setting_index"])
            if r["series"] not in t["series"]:
                t["series"].append(r["series"])
            t["cell"][(x, r["series"])] = (float(r["mean"]), float(r["std"]), int(r["n"]))
            if r.get("nonprivate"):
                t["np"].setdefault(x, float(r["nonprivate"]))
    for t in tables.values():
        t["x"].sort(key=lambda x: (float(x), t["idx"][x]))
    return tables


def fmt_x(x):
    """A setting as the study's tables print it (Rust's shortest round trip: 1, 0.5, 1e-5)."""
    v = float(x)
    if v == int(v) and abs(v) < 1e7:
        return str(int(v))
    if v != 0 and (abs(v) < 1e-3 or abs(v) >= 1e7):
        m, e = repr(v).split("e") if "e" in repr(v) else (f"{v:e}".split("e"))
        m = m.rstrip("0").rstrip(".") if "." in m else m
        return f"{m}e{int(e)}"
    return repr(v)


def fmt(v):
    return f"{100 * v:.2f}"


def print_tables(tables):
    print("## Mean ± std test accuracy (%) of every setting\n")
    print("`tight` model sensitivity, loss perturbation and (under replace-one) DP-SGD are the "
          "`corrected` draws (their `tight` calibration is the `corrected` one; `draws_mode` in "
          "the study), so their `tight` columns repeat the `corrected` ones.\n")
    for fig in FIGURES:
        for mode in MODES:
            t = tables.get((fig, mode))
            if not t:
                continue
            reps = max(c[2] for c in t["cell"].values())
            print(f"#### {fig} ({mode} calibration, {reps} repetitions)\n")
            print("| " + AXIS[fig] + " | " + " | ".join(t["series"]) + " | non-private |")
            print("|---" * (len(t["series"]) + 2) + "|")
            for x in t["x"]:
                cells = []
                for s in t["series"]:
                    c = t["cell"].get((x, s))
                    cells.append(f"{fmt(c[0])} ± {fmt(c[1])}" if c else "—")
                npv = t["np"].get(x)
                print(f"| {x} | " + " | ".join(cells) + f" | {fmt(npv) if npv is not None else '—'} |")
            print()


def best(t, x):
    """The series with the highest mean at x, and the sorted list of (mean, series)."""
    ranked = sorted(((t["cell"][(x, s)][0], s) for s in t["series"] if (x, s) in t["cell"]), reverse=True)
    return ranked[0][1], ranked


def print_findings(tables):
    print("## Evidence for the published findings (docs/study.md)\n")
    for mode in MODES:
        lines = []
        t = tables.get(("fig1a", mode))
        if t:
            bests = [(x, best(t, x)[0]) for x in t["x"]]
            sa = [x for x, b in bests if b == "subsample-aggregate"]
            lp = [x for x, b in bests if b == "loss-perturbation"]
            lines.append(
                f"- fig1a (δ = 0, B = 100): best per ε: "
                + ", ".join(f"{x}: {b} {fmt(t['cell'][(x, b)][0])}" for x, b in bests)
                + f". Subsample-and-aggregate best at {len(sa)}/{len(bests)} ε ({', '.join(sa) or 'none'}); "
                f"loss perturbation best at {', '.join(lp) or 'none'}."
            )
        t = tables.get(("fig2a", mode))
        if t and "loss-perturbation" in t["series"] and "subsample-aggregate" in t["series"]:
            ahead = [x for x in t["x"]
                     if t["cell"][(x, "loss-perturbation")][0] > t["cell"][(x, "subsample-aggregate")][0]]
            first = ahead[0] if ahead else None
            behind = [x for x in t["x"] if first is not None and float(x) < float(first)]
            pair = lambda x: (f"LP {fmt(t['cell'][(x, 'loss-perturbation')][0])} vs SA "
                              f"{fmt(t['cell'][(x, 'subsample-aggregate')][0])}")
            if first is None:
                lines.append("- fig2a (ε = 1, δ = 0): loss perturbation never overtakes subsample-and-aggregate.")
            else:
                before = f"B = {behind[-1]} ({pair(behind[-1])}) and " if behind else ""
                lines.append(
                    f"- fig2a (ε = 1, δ = 0): loss perturbation ahead of subsample-and-aggregate from "
                    f"B = {first}: crossing between {before}B = {first} ({pair(first)}); ahead at "
                    f"{len(ahead)}/{len(t['x'])} B.")
        for fig in ["fig1b", "fig2b", "fig3"]:
            t = tables.get((fig, mode))
            if not t:
                continue
            bests = [(x, best(t, x)) for x in t["x"]]
            dp = [x for x, (b, _) in bests if b == "dp-sgd"]
            other = [f"{x}: {b} {fmt(r[0][0])} vs DP-SGD {fmt(t['cell'][(x, 'dp-sgd')][0])}"
                     for x, (b, r) in bests if b != "dp-sgd" and (x, "dp-sgd") in t["cell"]]
            lines.append(f"- {fig}: DP-SGD best at {len(dp)}/{len(bests)} settings"
                         + (f"; elsewhere: {'; '.join(other)}" if other else "") + ".")
        ranks = collections.Counter()
        total = 0
        for fig in ["fig1a", "fig1b", "fig2a", "fig2b", "fig3", "fig4", "fig5a", "fig5b"]:
            t = tables.get((fig, mode))
            if not t or "prediction-sensitivity" not in t["series"]:
                continue
            for x in t["x"]:
                _, ranked = best(t, x)
                names = [s for _, s in ranked]
                ranks[len(names) - names.index("prediction-sensitivity")] += 1  # 1 = worst
                total += 1
        if total:
            lines.append(
                f"- prediction sensitivity over {total} settings (fig1a–fig5b): worst at {ranks[1]}, "
                f"second worst at {ranks[2]}, better than that at {total - ranks[1] - ranks[2]}.")
        if lines:
            print(f"### {mode}\n")
            print("\n".join(lines) + "\n")


def print_times(run_dir, log):
    path = os.path.join(run_dir, "timings.jsonl")
    if not os.path.exists(path):
        return
    secs = collections.defaultdict(lambda: collections.defaultdict(float))
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            secs[r["figure"]][r["method"]] += r.get("train_s", 0.0) + r.get("predict_s", 0.0)
    walls = {}
    if log and os.path.exists(log):
        # lines "UNIX_TIME [k/N] FIGURE MODE METHOD SETTING …"; a figure's wall time runs from
        # the first line naming it to the first line naming the next one (or the log's end).
        order, first, last_t = [], {}, None
        with open(log, errors="replace") as f:
            for line in f:
                m = re.match(r"^(\d+(?:\.\d+)?) \[\d+/\d+\] (fig\w+) ", line)
                if m:
                    t, fig = float(m.group(1)), m.group(2)
                    if fig not in first:
                        first[fig] = t
                        order.append(fig)
                m2 = re.match(r"^(\d+(?:\.\d+)?) ", line)
                if m2:
                    last_t = float(m2.group(1))
        for i, fig in enumerate(order):
            end = first[order[i + 1]] if i + 1 < len(order) else last_t
            walls[fig] = end - first[fig]
    print("## Time per figure\n")
    print("| figure | wall time | thread-seconds per method (timings.jsonl) |")
    print("|---|---|---|")
    tw = 0.0
    for fig in FIGURES:
        if fig not in secs:
            continue
        w = walls.get(fig)
        tw += w or 0.0
        per = ", ".join(f"{m} {v:,.0f}" for m, v in sorted(secs[fig].items(), key=lambda kv: -kv[1]))
        ws = f"{int(w // 3600)} h {int(w % 3600 // 60)} min {int(w % 60)} s" if w else "—"
        print(f"| {fig} | {ws} | {per} |")
    if walls:
        print(f"| **all** | **{int(tw // 3600)} h {int(tw % 3600 // 60)} min {int(tw % 60)} s** | |")
    print()


HEADING = re.compile(r"^#+ (fig\w+)\b.*\((paper|corrected|tight) calibration[^)]*?(\d+) repetitions\)")


def load_previous(doc):
    """Tables of an earlier docs/study.md: {(figure, mode): (reps, {(row, column): mean%})};
    of several tables of one figure and mode, the one with the most repetitions."""
    found = []
    key, header, tab = None, None, None
    with open(doc) as f:
        for line in f:
            m = HEADING.match(line.strip())
            if m:
                key, header, tab = (m.group(1), m.group(2)), None, {}
                found.append((key, int(m.group(3)), tab))
                continue
            if key is None:
                continue
            if not line.startswith("|"):
                if header is not None:
                    key = None
                continue
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if header is None:
                header = cells
                continue
            if set(cells[0]) <= set("-"):
                continue
            for col, c in zip(header[1:], cells[1:]):
                mm = re.match(r"^([\d.]+)", c)
                if mm:
                    tab[(cells[0], col)] = float(mm.group(1))
    prev = {}
    for key, reps, tab in found:
        if tab and (key not in prev or prev[key][0] < reps):
            prev[key] = (reps, tab)
    return prev


def print_diff(tables, prev):
    print("## Against the committed tables\n")
    print("| figure | mode | previous reps | cells | mean Δ (points) | mean |Δ| | largest |Δ| (setting, series: before → after) |")
    print("|---|---|---|---|---|---|---|")
    by_series = []
    for fig in FIGURES:
        for mode in MODES:
            t = tables.get((fig, mode))
            if not t or (fig, mode) not in prev:
                continue
            reps, old = prev[(fig, mode)]
            deltas = []
            for x in t["x"]:
                for s in t["series"] + ["non-private"]:
                    o = old.get((x, s))
                    if o is None:
                        continue
                    new = t["np"].get(x) if s == "non-private" else t["cell"].get((x, s), (None,))[0]
                    if new is None:
                        continue
                    deltas.append((100 * new - o, x, s, o, 100 * new))
            if not deltas:
                continue
            md = sum(d[0] for d in deltas) / len(deltas)
            ma = sum(abs(d[0]) for d in deltas) / len(deltas)
            big = max(deltas, key=lambda d: abs(d[0]))
            print(f"| {fig} | {mode} | {reps} | {len(deltas)} | {md:+.2f} | {ma:.2f} | "
                  f"{big[1]}, {big[2]}: {big[3]:.2f} → {big[4]:.2f} |")
            by_series.extend((fig, mode, reps, d) for d in deltas)
    print()
    print("By method (the same cells, per series): mean, smallest and largest Δ in points\n")
    print("| figure | mode | series | cells | mean Δ | smallest Δ | largest Δ |")
    print("|---|---|---|---|---|---|---|")
    groups = collections.OrderedDict()
    for fig, mode, _, d in by_series:
        groups.setdefault((fig, mode, d[2]), []).append(d[0])
    for (fig, mode, s), ds in groups.items():
        print(f"| {fig} | {mode} | {s} | {len(ds)} | {sum(ds) / len(ds):+.2f} | "
              f"{min(ds):+.2f} | {max(ds):+.2f} |")
    print()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run_dir")
    ap.add_argument("--previous", help="an earlier docs/study.md to compare against")
    ap.add_argument("--log", help="the run's stderr with Unix-time prefixes")
    a = ap.parse_args()
    if not os.path.exists(os.path.join(a.run_dir, "summary.csv")):
        sys.exit(f"error: {a.run_dir}/summary.csv not found (is the run finished?)")
    tables = load_summary(a.run_dir)
    print_times(a.run_dir, a.log)
    print_findings(tables)
    if a.previous:
        print_diff(tables, load_previous(a.previous))
    print_tables(tables)


if __name__ == "__main__":
    main()
