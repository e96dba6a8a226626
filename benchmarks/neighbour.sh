#!/bin/bash
# A test-suite-like neighbour for loaded measurements: pure-Python test files of this repository
# in a loop (bursty, about one CPU of demand, fork/exec and file I/O), while the file given as
# $1 (default /tmp/neighbour.on) exists. Start: touch /tmp/neighbour.on; setsid -f benchmarks/neighbour.sh
# Stop: rm /tmp/neighbour.on (the loop ends after the current pass).
on=${1:-/tmp/neighbour.on}
cd "$(dirname "$0")/.."
while [ -e "$on" ]; do
    .venv/bin/python -m pytest -q -p no:cacheprovider tests/analysis/test_analysis_intervals.py \
        tests/compare/test_comparison.py tests/analysis/test_analysis_bands.py tests/report/test_report_tables.py \
        >/dev/null 2>&1
done
