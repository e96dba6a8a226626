#!/usr/bin/env bash
# The suite `make test` runs, in three phases. Each test module names its lane with one marker
# (`pytestmark = pytest.mark.LANE`; pyproject.toml says what each lane means, and collection fails
# for a module with none or two); each lane here is a `pytest -m` of those markers:
#   1. three lanes side by side: the QEMU guest tests with the PostgreSQL ones (guest), the fleet
#      tests (fleet), and the tests checked against their own oracles (oracle: exports,
#      importers, signals); they wait on guest boots, servers and Ansible over loopback sshd and
#      judge no verdict or latency of the machine (pgbench's are checked against pgbench's own
#      log). The guest and fleet lanes each take a few oracle tests too (oracle_beside_guest,
#      oracle_beside_fleet) so that the three end within about a minute of each other;
#   2. two lanes side by side of tests that judge no verdict, latency or machine load either
#      (each alone uses about one of this machine kind's two CPUs): the tests that change the
#      machine (machine: sysctls, THP, mounts, cgroups; one at a time, so that none sees
#      another's change), and the rest (pure: numbers against numpy, files, the command line);
#   3. the tests that judge verdicts, latencies and the machine's load (quiet), alone, on a
#      machine no other test is using.
# Extra arguments go to every pytest (e.g. -x). Exit status: non-zero when any phase failed.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
args=(-q -p no:cacheprovider "$@")
logs=$(mktemp -d /tmp/stallbench-tests.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$logs"' EXIT
side_by_side=("guest or oracle_beside_guest" "fleet or oracle_beside_fleet" "oracle")
side_by_side_then=("machine" "pure")
alone="quiet"

# Byte-compile the source once: where PYTHONDONTWRITEBYTECODE is set, every `stallbench`
# process (hundreds here) and every QEMU guest (which sees this tree read-only) would compile
# each module again (0.2 s a process here, 2.3 s a guest run under TCG).
"$PY" -m compileall -q -j 0 src > /dev/null
# and let pytest keep its assertion rewrites of the test modules (tests/**/__pycache__): each
# of the six pytest processes collects every module, and rewriting them all again took each
# 5 of its 8.5 s of collection here (3.5 s with them kept)
unset PYTHONDONTWRITEBYTECODE

# busy_cpus START_TICKS: the CPUs' busy share since START_TICKS (from /proc/stat's first line)
cpu_ticks() { awk '/^cpu /{print $2+$3+$4+$7+$8, $2+$3+$4+$5+$6+$7+$8}' /proc/stat; }
busy_cpus() {
    local busy0 total0 busy1 total1
    read -r busy0 total0 <<< "$1"
    read -r busy1 total1 <<< "$(cpu_ticks)"
    awk -v b=$((busy1 - busy0)) -v t=$((total1 - total0)) -v n="$(nproc)" \
        'BEGIN { printf "%.2f of %d CPUs busy", (t ? b / t : 0) * n, n }'
}

status=0
# side_by_side PHASE LANES...: one pytest per lane, at once; their logs in order when all ended
side_by_side() {
    local phase=$1 index rc
    shift
    local lanes=("$@") pids=()
    for index in "${!lanes[@]}"; do
        # (a short --basetemp: test_show checks that its lines, a path among them, fit 100
        # columns)
        "$PY" -m pytest "${args[@]}" --basetemp="$logs/$phase$index" -m "${lanes[$index]}" \
            tests > "$logs/log$phase$index" 2>&1 &
        pids+=($!)
    done
    for index in "${!pids[@]}"; do
        wait "${pids[$index]}"
        rc=$?
        echo "== -m '${lanes[$index]}' (side by side with the others of phase $phase): exit $rc"
        cat "$logs/log$phase$index"
        [ "$rc" -eq 0 ] || [ "$rc" -eq 5 ] || status=1
    done
}
started=$SECONDS ticks=$(cpu_ticks)
side_by_side 1 "${side_by_side[@]}"
echo "== phase 1: $((SECONDS - started)) s, $(busy_cpus "$ticks")"
started=$SECONDS ticks=$(cpu_ticks)
side_by_side 2 "${side_by_side_then[@]}"
echo "== phase 2: $((SECONDS - started)) s, $(busy_cpus "$ticks")"

echo "== -m '$alone', alone"
started=$SECONDS ticks=$(cpu_ticks)
"$PY" -m pytest "${args[@]}" -m "$alone" tests || status=1
echo "== phase 3: $((SECONDS - started)) s, $(busy_cpus "$ticks")"
exit $status
