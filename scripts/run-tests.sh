#!/usr/bin/env bash
# The suite `make test` runs, in three phases:
#   1. three lanes side by side: the QEMU guest tests (with the PostgreSQL ones), the fleet
#      tests, and the tests checked against their own oracles (exports, importers, signals);
#      they wait on guest boots, servers and Ansible over loopback sshd and judge no verdict
#      or latency of the machine (pgbench's are checked against pgbench's own log);
#   2. two lanes side by side of tests that judge no verdict, latency or machine load either
#      (each alone uses about one of this machine kind's two CPUs): one of the tests that change
#      the machine (sysctls, THP, mounts, cgroups: one at a time, so that none sees another's
#      change), one of the rest (numbers against numpy, files, the command line);
#   3. everything else alone, so the tests that judge verdicts, latencies and the machine's
#      load see a machine no other test is using (a test file not named in phases 1 and 2 is
#      here, the safe default).
# Extra arguments go to every pytest (e.g. -x). Exit status: non-zero when any phase failed.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
args=(-q -p no:cacheprovider "$@")
logs=$(mktemp -d /tmp/stallbench-tests.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$logs"' EXIT
# The lanes of phase 1 end within about a minute of each other (the QEMU and fleet lanes wait
# on guests and Ansible; each takes a share of the tests checked against their own oracles).
side_by_side=(
    "tests/vm/test_vm_*.py tests/workloads/test_workload_pgbench*.py tests/bisect/test_bisect_git.py
     tests/trust/test_trust_guest.py
     tests/compare/test_stalls_real.py"
    "tests/fleet/test_fleet*.py tests/trust/test_fleet_trust.py tests/compare/test_percentiles.py tests/analysis/test_analysis_intervals.py"
    # checked against their own oracles (numpy on the raw ops, fio's output, the files they
    # wrote, the exit codes and signals), never against a verdict or the machine's load
    "tests/exporters/test_export_*.py tests/cli/test_cli_conventions.py tests/project/test_readme_query.py
     tests/importers/test_import*.py tests/reliability/test_reliability_hostile.py
     tests/reliability/test_reliability_signals.py tests/reliability/test_reliability_enospc.py tests/run/test_run_workloads.py
     tests/workloads/test_workload_fio.py tests/project/test_readme_blocks.py"
)

side_by_side_then=(
    # they change the machine: one at a time
    "tests/env/test_env_signals.py tests/env/test_env_system.py tests/env/test_env_inventory.py
     tests/env/test_env_unmount_others.py tests/env/test_env_fs_sizes.py tests/env/test_env_loopfs.py
     tests/reliability/test_reliability_kill.py tests/reliability/test_reliability_damaged.py tests/workloads/test_supervisor.py
     tests/workloads/test_default_data_size.py tests/workloads/test_workload_command.py
     tests/monitors/test_trace_workload_only.py tests/core/test_tracefs_instance.py tests/workloads/test_native_loop.py
     tests/reliability/test_reliability_concurrent.py tests/trust/test_trust_mkfs.py tests/trust/test_trust_journal.py
     tests/trust/test_trust_bounds.py tests/trust/test_trust_durable.py tests/compare/test_series.py
     tests/where/test_where_not_device.py tests/trust/test_trust_images.py tests/trust/test_trust_tracecap.py
     tests/trust/test_trust_gitowner.py"
    # numbers against numpy on the raw ops, files, the command line
    "tests/results/test_summary.py tests/compare/test_compare_report.py tests/compare/test_compare_fixtures.py
     tests/compare/test_compare_one_variant.py tests/compare/test_comparison.py tests/monitors/test_monitor_record.py
     tests/monitors/test_monitor_rowstore.py tests/monitors/test_monitor_parsing.py tests/report/test_report_*.py
     tests/cli/test_cli_package.py tests/cli/test_cli_help.py tests/cli/test_cli_startup.py
     tests/results/test_runmeta.py tests/plan/test_plan_*.py tests/report/test_show*.py tests/run/test_progress_display.py
     tests/run/test_progress.py tests/results/test_record.py tests/monitors/test_delay_decoding.py
     tests/project/test_benchmarks_run.py tests/core/test_options_schema.py tests/monitors/test_syscall_names.py
     tests/project/test_layers.py tests/results/test_store.py tests/analysis/test_analysis_bands.py
     tests/analysis/test_analysis_stalls.py tests/core/test_signals.py tests/compare/test_verdict_words.py
     tests/workloads/test_workload_option_names.py tests/run/test_runner_order.py tests/run/test_first_hour_runs.py
     tests/compare/test_metric_verdicts.py tests/compare/test_clock_start.py tests/trust/test_trust_deps.py
     tests/analysis/test_changepoints.py tests/report/test_headline.py tests/compare/test_check_outputs.py
     tests/api/test_notebook_api.py tests/cli/test_cli_docs_env.py tests/where/test_where_split.py"
)

# Byte-compile the source once: where PYTHONDONTWRITEBYTECODE is set, every `stallbench`
# process (hundreds here) and every QEMU guest (which sees this tree read-only) would compile
# each module again (0.2 s a process here, 2.3 s a guest run under TCG).
"$PY" -m compileall -q -j 0 src > /dev/null

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
        # shellcheck disable=SC2086  # the glob is expanded here, on purpose
        "$PY" -m pytest "${args[@]}" --basetemp="$logs/$phase$index" ${lanes[$index]} \
            > "$logs/log$phase$index" 2>&1 &
        pids+=($!)
    done
    for index in "${!pids[@]}"; do
        wait "${pids[$index]}"
        rc=$?
        echo "== ${lanes[$index]} (side by side with the others of phase $phase): exit $rc"
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

ignore=()
for globs in "${side_by_side[@]}" "${side_by_side_then[@]}"; do
    for glob in $globs; do ignore+=(--ignore-glob="$glob"); done
done
echo "== the rest, alone"
started=$SECONDS ticks=$(cpu_ticks)
"$PY" -m pytest "${args[@]}" "${ignore[@]}" tests || status=1
echo "== phase 3: $((SECONDS - started)) s, $(busy_cpus "$ticks")"
exit $status
