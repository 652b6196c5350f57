#!/usr/bin/env python3
"""Finish the figures an unfinished `reproduce all` run has completed, without computing.

    scripts/split_finished.py RUN_DIR OUT_DIR [--bin PRIVPRED]

A long run (scripts/rerun_study.sh) writes its plots, results.csv and summary.csv only at the
end. This copies, for every figure of RUN_DIR that is complete, its rows and timings into
OUT_DIR/<figure>/ with the run's manifest narrowed to that figure, and calls
`privpred reproduce <figure> --resume` there: every unit is already finished, so it computes
nothing and only writes the figure's files (plots, results.csv, summary.csv, summary.md) —
the same files the whole run will write for it (unit ids and seeds depend only on the unit).
Then OUT_DIR/merged/ gets the concatenated summary.csv and timings.jsonl for
scripts/study_tables.py.

A figure counts as complete when a later figure of the manifest has rows (the sweep runs the
figures in order) or the run has its summary.csv. The last figure in progress is left out.
Standard library only.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run_dir")
    ap.add_argument("out_dir")
    ap.add_argument("--bin", default="target/release/privpred")
    a = ap.parse_args()
    manifest = json.load(open(os.path.join(a.run_dir, "manifest.json")))
    order = manifest["figures"]
    rows = {f: [] for f in order}
    with open(os.path.join(a.run_dir, "results.partial.jsonl")) as f:
        for line in f:
            fig = line.split('"unit_id":"', 1)[1].split("/", 1)[0]
            rows[fig].append(line)
    timings = {f: [] for f in order}
    with open(os.path.join(a.run_dir, "timings.jsonl")) as f:
        for line in f:
            timings[json.loads(line)["figure"]].append(line)
    finished_run = os.path.exists(os.path.join(a.run_dir, "summary.csv"))
    done = [f for i, f in enumerate(order)
            if rows[f] and (finished_run or any(rows[g] for g in order[i + 1:]))]
    if not done:
        sys.exit("error: no figure of the run is complete yet")
    merged = os.path.join(a.out_dir, "merged")
    os.makedirs(merged, exist_ok=True)
    header, summary, all_timings = None, [], []
    for fig in done:
        d = os.path.join(a.out_dir, fig)
        if os.path.exists(d):
            shutil.rmtree(d)
        os.makedirs(d)
        m = dict(manifest, figures=[fig])
        json.dump(m, open(os.path.join(d, "manifest.json"), "w"), indent=2)
        open(os.path.join(d, "results.partial.jsonl"), "w").writelines(rows[fig])
        open(os.path.join(d, "timings.jsonl"), "w").writelines(timings[fig])
        cmd = [a.bin, "reproduce", fig, "--resume", "--out", d,
               "--repetitions", str(manifest["repetitions"]),
               "--calibration", ",".join(manifest["calibrations"]),
               "--seed", str(manifest["seed"]),
               "--bias", str(manifest["options"]["bias"]),
               "--cv-draws", str(manifest["options"]["cv_draws"]),
               "--neighbours", manifest["options"]["neighbours"]]
        if manifest["quick"]:
            cmd.append("--quick")
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode != 0:
            sys.exit(f"error: {' '.join(cmd)} failed:\n{res.stderr}")
        counts = re.search(r"sweep: (\d+) units, (\d+) already finished", res.stderr)
        if not counts or counts.group(1) != counts.group(2):
            sys.exit(f"error: {fig} was not complete (the finalising run computed units):\n"
                     f"{res.stderr}")
        lines = open(os.path.join(d, "summary.csv")).read().splitlines(keepends=True)
        header = header or lines[0]
        summary += lines[1:]
        all_timings += timings[fig]
        print(f"{fig}: {len(rows[fig])} rows, files in {d}")
    open(os.path.join(merged, "summary.csv"), "w").writelines([header] + summary)
    open(os.path.join(merged, "timings.jsonl"), "w").writelines(all_timings)
    print(f"merged: {merged} ({', '.join(done)})")


if __name__ == "__main__":
    main()
