"""The probe a fleet run sends each host before a start (orchestrate.py): one `raw` command,
no Python on the host, that prints stallbench's version, the boot id, uname -r and the Python
for Ansible's modules, and the one line that says why it failed."""

from __future__ import annotations

import re
import shlex
from typing import Any

from .hostvalues import PYTHON_PATH_PATTERN, python_problem
from .inventory import HostConfig

NO_SPACE_RE = re.compile(r"no space left on device|ENOSPC|disk quota exceeded", re.I)
# the Python of a host's modules: the probe's choice, from this playbook's probe or an earlier
PYTHON_PROBED = {"ansible_python_interpreter": "{{ probe.stdout_lines[-1] | trim }}"}
PYTHON_KNOWN = {"ansible_python_interpreter": "{{ sb_python }}"}
PROBE_NO_PYTHON = 4     # the probe's exit status when no Python runs Ansible's modules
PROBE_LINES = 5
# $1-$4: boot id file, results directory, plan path and text; $5: Ansible's INTERPRETER_PYTHON
# for the host (a path, or auto...: discovery), $6: its INTERPRETER_PYTHON_FALLBACK list (the
# candidates discovery takes the first of that `command -v` finds); then the stallbench command.
# Prints PROBE_LINES lines, the last of its output (a host's login shell may print before it):
# stallbench's version, the boot id, uname -r, a note (when the Python to use is not the one
# discovery found: which one that was and why it does not run; else empty), the Python to use.
PROBE_UNSAFE_DIR = 5   # its exit status when a folder of the run's path is not root's alone
# The run's folder: every folder on its path that exists must belong to root (or the SSH user)
# and be writable by nobody else, or be sticky (like /tmp: nobody else can rename what is ours
# in it) and not the last; the missing ones are made 0700. A folder another local user made
# first (the plan file root runs, the tree it mounts) is refused, never used.
PROBE_SCRIPT = r"""b="$1"; r="$2"; p="$3"; t="$4"; w="$5"; fb="$6"; shift 6
owned() {
    me=$(id -u); d=""; rest=${1#/}
    while [ -n "$rest" ]; do
        d="$d/${rest%%/*}"; case $rest in */*) rest=${rest#*/};; *) rest="";; esac
        [ "${d##*/}" != "" ] || continue
        if [ ! -e "$d" ] && [ ! -L "$d" ]; then
            mkdir -m 0700 -- "$d" || return 1
        fi
        if [ -L "$d" ] || [ ! -d "$d" ]; then
            echo "workdir: $d is not a folder (a symlink?): refusing it" >&2; return @UNSAFE@
        fi
        o=$(stat -c %u -- "$d") && m=$(stat -c %a -- "$d") || return 1
        if [ "$o" != 0 ] && [ "$o" != "$me" ]; then
            echo "workdir: $d belongs to uid $o, not to root: another user may change what" \
                 "root runs there; refusing it (set stallbench_workdir to a folder of root's)" >&2
            return @UNSAFE@
        fi
        if [ $((0$m & 022)) != 0 ] && { [ $((0$m & 01000)) = 0 ] || [ -z "$rest" ]; }; then
            echo "workdir: $d is writable by other users (mode $m): refusing it (set" \
                 "stallbench_workdir to a folder only root can write)" >&2
            return @UNSAFE@
        fi
    done
}
"$@" --version && cat "$b" && uname -r && owned "$r" &&
{ command -v rsync >/dev/null || { echo "rsync is not installed" >&2; exit 3; }; } &&
{ [ -z "$p" ] || { umask 077; printf %s "$t" > "$p"; }; } || exit $?
runs() {
    why=$($1 -c 'import sys; sys.exit(sys.version_info < (3, 8) and "older than 3.8")' \
          2>&1 </dev/null)
    s=$?
    why=$(printf '%s\n' "$why" | sed -n '/[^[:space:]]/{p;q;}' | cut -c1-200)
    [ -n "$why" ] || why="exit status $s"
    return $s
}
case "$w" in
auto*)
    d=/usr/bin/python3
    for c in $fb; do
        f=$(command -v "$c" 2>/dev/null) && case "$f" in /*) d=$f; break;; esac
    done
    runs "$d" && { echo; echo "$d"; exit 0; }
    dw=$why
    if [ "$d" != /usr/bin/python3 ] && runs /usr/bin/python3; then
        echo "$d, which does not run ($dw)"; echo /usr/bin/python3; exit 0
    fi
    also=""
    [ "$d" = /usr/bin/python3 ] || also=", nor does /usr/bin/python3 ($why)"
    echo "python: interpreter discovery found $d, which does not run ($dw)$also" >&2
    exit @NO_PYTHON@;;
*)
    runs "$w" && { echo; echo "$w"; exit 0; }
    echo "python: ansible_python_interpreter $w does not run ($why)" >&2
    exit @NO_PYTHON@;;
esac""".replace("@NO_PYTHON@", str(PROBE_NO_PYTHON)) \
    .replace("@UNSAFE@", str(PROBE_UNSAFE_DIR))


def probe_task(cfg: HostConfig, remote_results: str, plan_path: str = "") -> dict[str, Any]:
    """One command, no Python on the host (`raw`), before a start: stallbench --version
    (must be ours), the boot id, uname -r, the run's directory, the host's plan (the extra
    var `sb_plan_text`: a plan's text is never a template), and the Python for Ansible's
    modules (PROBE_SCRIPT: the interpreter Ansible would use, checked to run; when discovery
    found one that does not, the host's /usr/bin/python3), which must be a plain absolute
    path (hostvalues.py)."""
    argv = ["sh", "-c", PROBE_SCRIPT, "probe", cfg.boot_id_path, remote_results, plan_path]
    python = "{{ sb_python_setting | quote }} {{ sb_python_fallback | quote }}"
    return {"name": "probe", "raw": f"{shlex.join(argv)} {{{{ sb_plan_text | quote }}}} "
                                    f"{python} {shlex.join(cfg.command)}",
            "register": "probe",
            "vars": {"sb_python_setting": "{{ query('ansible.builtin.config', "
                                          "'INTERPRETER_PYTHON') | first }}",
                     "sb_python_fallback": "{{ query('ansible.builtin.config', "
                                           "'INTERPRETER_PYTHON_FALLBACK') | first "
                                           "| join(' ') }}"},
            "failed_when": f"probe.rc != 0 or probe.stdout_lines | length < {PROBE_LINES} "
                           f"or probe.stdout_lines[-{PROBE_LINES}] | trim != sb_version or "
                           "(sb_release | default('') != '' and "
                           f"probe.stdout_lines[{2 - PROBE_LINES}] | trim != sb_release) or "
                           "probe.stdout_lines[-1] | trim is not "
                           f"match('{PYTHON_PATH_PATTERN}')"}


def probe_lines(result: Any) -> list[str]:
    """The probe's own lines: its last PROBE_LINES (what a host's login shell printed first,
    such as pyenv's "cannot rehash" on a read-only home, is not the probe's)."""
    lines = [line.strip() for line in result.task("probe").get("stdout_lines") or []]
    return lines[-PROBE_LINES:]


def probe_failure(result: Any, host: str, first: bool, version_here: str) -> str:
    """Why a probe failed, in one line (for HostReport.fail); `version_here` is this
    controller's `stallbench --version`."""
    probe = result.task("probe")
    version = next((line for line in probe_lines(result) if line.startswith("stallbench ")),
                   None)
    if result.state == "unreachable":
        return (f"unreachable at start: {result.message}" if first
                else f"lost before a start: {result.message}")
    if NO_SPACE_RE.search(result.message):
        return f"disk full at start: {result.message}"
    if version is not None and version != version_here:
        return (f"runs {version}, this controller {version_here}: install the same "
                "version on every host (`stallbench deploy --hosts INVENTORY`)")
    lines = probe_lines(result)
    if probe.get("rc") == 0 and len(lines) == PROBE_LINES and python_problem(lines[-1]):
        return f"{python_problem(lines[-1])}: refused"
    if probe.get("rc") == PROBE_NO_PYTHON:
        detail = result.message.split("python: ", 1)[-1]
        return (f"no Python for Ansible's modules on {host}: {detail}; set "
                f"ansible_python_interpreter for {host} in the inventory to a "
                "Python 3.8 or newer that runs there (e.g. /usr/bin/python3)")
    if probe and probe.get("rc") not in (0, None) and version is None:
        return (f"stallbench is not usable there ({result.message}); install this "
                "controller's with `stallbench deploy --hosts INVENTORY`, or set the "
                "host variable `stallbench` to its command")
    return f"{'at start: ' if first else ''}{result.message}"


def last_line(pattern: re.Pattern[str], text: str) -> str:
    """The last line of a host's output that matches `pattern` (at most 300 characters)."""
    lines = [line.strip() for line in text.splitlines() if pattern.search(line)]
    return lines[-1][:300] if lines else ""
