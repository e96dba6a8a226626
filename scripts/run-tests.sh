#!/usr/bin/env bash
# The suite `make test` runs, in two phases:
#   1. three lanes side by side: the QEMU guest tests (with the PostgreSQL ones), the fleet
#      tests, and the tests checked against their own oracles (exports, importers, signals);
#      they wait on guest boots, servers and Ansible over loopback sshd and judge no verdict
#      or latency of the machine (pgbench's are checked against pgbench's own log);
#   2. everything else alone, so the tests that judge verdicts, latencies and the machine's
#      load see a machine no other test is using.
# Extra arguments go to every pytest (e.g. -x). Exit status: non-zero when any phase failed.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
args=(-q -p no:cacheprovider "$@")
logs=$(mktemp -d /tmp/stallbench-tests.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$logs"' EXIT
side_by_side=(
    "tests/test_vm_*.py tests/test_workload_pgbench*.py tests/test_bisect_git.py"
    "tests/test_fleet*.py"
    # checked against their own oracles (numpy on the raw ops, fio's output, the files they
    # wrote, the exit codes and signals), never against a verdict or the machine's load
    "tests/test_export_*.py tests/test_import*.py tests/test_reliability_hostile.py
     tests/test_reliability_signals.py tests/test_reliability_enospc.py tests/test_core_run.py
     tests/test_workload_fio.py tests/test_analysis_intervals.py tests/test_percentiles.py
     tests/test_stalls_real.py"
)

status=0
pids=()
for index in "${!side_by_side[@]}"; do
    # shellcheck disable=SC2086  # the glob is expanded here, on purpose
    "$PY" -m pytest "${args[@]}" --basetemp="$logs/tmp$index" ${side_by_side[$index]} \
        > "$logs/log$index" 2>&1 &
    pids+=($!)
done
for index in "${!pids[@]}"; do
    wait "${pids[$index]}"
    rc=$?
    echo "== ${side_by_side[$index]} (side by side with the others of phase 1): exit $rc"
    cat "$logs/log$index"
    [ "$rc" -eq 0 ] || [ "$rc" -eq 5 ] || status=1
done

ignore=()
for globs in "${side_by_side[@]}"; do
    for glob in $globs; do ignore+=(--ignore-glob="$glob"); done
done
echo "== the rest, alone"
"$PY" -m pytest "${args[@]}" "${ignore[@]}" tests || status=1
exit $status
