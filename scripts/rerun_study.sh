#!/usr/bin/env bash
# The whole linear study in one process, timed:
#
#   scripts/rerun_study.sh [OUT_DIR] [PRIVPRED_BIN]
#
# runs `privpred reproduce all --repetitions 100 --calibration paper,corrected,tight` (every
# linear figure fig1a–fig6b on MNIST and fig4 on the MNIST-1M substitute; one process, so the
# non-private fits and the teachers are computed once for the three modes) with --resume (an
# interrupted run continues where it stopped), and writes next to OUT_DIR:
#   OUT_DIR.log   the progress lines, each prefixed by its Unix time (for per-figure wall times)
#   OUT_DIR.time  /usr/bin/time -v of the process (wall time, CPU seconds, peak memory)
#   OUT_DIR.md    scripts/study_tables.py's tables, findings evidence, times and the
#                 differences against the committed docs/study.md
# Run it on an otherwise idle machine: its wall time is the study's time docs/study.md reports.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-results/all}
BIN=${2:-target/release/privpred}
EXTRA=${RERUN_ARGS:-}
mkdir -p "$(dirname "$OUT")"
# shellcheck disable=SC2086
/usr/bin/time -v -o "$OUT.time" "$BIN" reproduce all --repetitions 100 \
    --calibration paper,corrected,tight --out "$OUT" --resume $EXTRA \
    2> >(python3 -u -c '
import sys, time
for line in sys.stdin:
    for part in line.replace("\r", "\n").splitlines():
        if part.strip():
            print(f"{time.time():.1f} {part}", flush=True)
' >> "$OUT.log") > "$OUT.stdout"
python3 scripts/study_tables.py "$OUT" --log "$OUT.log" --previous docs/study.md > "$OUT.md"
echo "done: $OUT.md"
