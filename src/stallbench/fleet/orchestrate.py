"""One fleet run: for every host, in its own thread,

  preflight  stallbench --version (must equal ours), boot id, uname -r, a directory for the run,
             the Python for Ansible's modules (Ansible's choice if it runs, else the host's
             /usr/bin/python3; every later task is given it, so no playbook discovers again)
  per segment (one per boot when variants boot kernels, else one for the whole plan):
    boot     grub-reboot ENTRY / kexec -l, Ansible's reboot (waits for a new boot id), then
             uname -r must equal the plan's release, or the host is refused
    start    copy the host's plan, start stallbench as ONE async task (poll: 0), then nothing:
             no SSH, no Python from us on the host until the planned time is over
    status   one async_status when the plan should be over (more only if it overran);
             a host that does not answer is retried until its reconnect timeout
    cleanup  `stallbench cleanup` on the host after a lost connection, a killed stallbench or
             a reboot during the run
    pull     synchronize (rsync) of the host's results, then import into RESULTS

Every failure is kept as an event of that host; the other hosts go on.
"""

from __future__ import annotations

import contextlib
import re
import secrets
import shlex
import shutil
import signal
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..core.errors import ExitCode
from ..core.jsonfile import write_json_atomic
from ..core.version import __version__
from ..plan.plan import Plan
from ..results.store import load_run
from ..settings.hosts import describe_boot
from .ansible import Runner, check_ansible, host_key_warning
from .boot import boot_failed, boot_tasks
from .hostvalues import job_problem, python_problem
from .inventory import HostConfig, assign, load_inventory
from .outcome import FleetOutcome, HostReport
from .probe import (
    NO_SPACE_RE,
    PROBE_LINES,
    PYTHON_KNOWN,
    PYTHON_PROBED,
    last_line,
    probe_failure,
    probe_lines,
    probe_task,
)
from .pull import PULL_OPTIONS, import_runs, skipped_by_rsync
from .subplan import Segment, check_plan_size, segments


class _Stopped(Exception):
    pass


class FleetRun:
    def __init__(self, plan: Plan, source: Path | list[str], log=print):
        check_ansible()
        self.plan = plan
        self.log = log
        if warning := host_key_warning():
            log(warning)
        self.results = Path(plan.results)
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        self.fleet_run = f"{stamp}-{secrets.token_hex(3)}"
        self.directory = self.results / ".fleet" / self.fleet_run
        made = [p for p in (self.results, self.results / ".fleet") if not p.exists()]
        self.directory.mkdir(parents=True, exist_ok=True)
        try:
            self.inventory = load_inventory(source, self.directory)
            self.hosts = assign(plan, self.inventory)
            for host in self.hosts.values():
                for segment in segments(plan, host.variants):
                    check_plan_size(segment)
        except BaseException:            # bad input: leave nothing behind
            shutil.rmtree(self.directory, ignore_errors=True)
            for path in reversed(made):
                with contextlib.suppress(OSError):
                    path.rmdir()
            raise
        self.runner = Runner(self.inventory.path, self.directory / "ansible")
        self.stop = threading.Event()
        self._python: dict[str, str] = {}       # host -> the Python its probe chose
        self._python_noted: set[str] = set()

    # -- the whole fleet ------------------------------------------------------------------------
    def run(self) -> FleetOutcome:
        reports = {name: HostReport(name, cfg.variants) for name, cfg in self.hosts.items()}
        threads = [threading.Thread(target=self._host_main, args=(cfg, reports[name]),
                                    name=f"fleet-{name}", daemon=True)
                   for name, cfg in self.hosts.items()]
        def stop(signum: int, frame: Any) -> None:
            if not self.stop.is_set():
                self.log(f"stallbench: {signal.Signals(signum).name}: stopping stallbench on "
                         "every host (it keeps what it recorded)")
            self.stop.set()

        previous = {signum: signal.signal(signum, stop)
                    for signum in (signal.SIGINT, signal.SIGTERM)}
        try:
            for thread in threads:
                thread.start()
            for thread in threads:
                while thread.is_alive():
                    thread.join(0.5)
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
        outcome = FleetOutcome(self.fleet_run, self.directory, list(reports.values()),
                               [v.name for v in self.plan.variants], self.stop.is_set())
        write_json_atomic(self.directory / "summary.json", {
            "fleet_run": self.fleet_run, "inventory": str(self.inventory.path),
            "hosts": {r.host: {"ok": r.ok, "failure": r.failure, "events": r.events,
                               "variants": r.variants, "runs": [str(p) for p in r.runs],
                               "status_checks": r.status_checks, "boot_ids": r.boot_ids,
                               "release": r.release} for r in outcome.reports}})
        shutil.rmtree(self.directory / "mirror", ignore_errors=True)
        return outcome

    def _host_main(self, cfg: HostConfig, report: HostReport) -> None:
        try:
            self._host(cfg, report)
        except _Stopped:
            report.fail("stopped by the user (Ctrl-C) before it finished")
        except Exception as exc:  # noqa: BLE001 - one host's bug must not lose the others
            report.fail(f"internal error: {type(exc).__name__}: {exc}")

    # -- one host -------------------------------------------------------------------------------
    def _probed(self, cfg: HostConfig, report: HostReport, result) -> None:
        """Keep the Python the probe chose for this host's later playbooks; say once when it
        is not the one Ansible's discovery found."""
        lines = probe_lines(result)
        if len(lines) < PROBE_LINES or not lines[4] or python_problem(lines[4]):
            return
        self._python[cfg.name] = lines[4]
        if lines[3] and cfg.name not in self._python_noted:
            self._python_noted.add(cfg.name)
            report.events.append(
                f"Ansible's interpreter discovery found {lines[3]}: using {lines[4]} "
                f"(set ansible_python_interpreter for {cfg.name} in the inventory to choose)")

    def _python_vars(self, cfg: HostConfig) -> dict[str, Any]:
        return {"sb_python": self._python.get(cfg.name, "auto_silent")}

    _version = f"stallbench {__version__}"

    def _host(self, cfg: HostConfig, report: HostReport) -> None:
        remote = f"{cfg.workdir.rstrip('/')}/{self.fleet_run}"
        remote_results = f"{remote}/results"
        mirror = self.directory / "mirror" / cfg.name
        mirror.mkdir(parents=True, exist_ok=True, mode=0o700)
        mirror.parent.chmod(0o700)          # what a host sent is only ours to read
        imported: set[str] = set()
        first = True
        for segment in segments(self.plan, cfg.variants):
            if self.stop.is_set():
                raise _Stopped
            if segment.boot:
                if first:        # before the first reboot: is stallbench there at all?
                    pre = self.runner.run(cfg.name, "preflight",
                                          [probe_task(cfg, remote_results)],
                                          {"sb_version": self._version, "sb_release": "",
                                           "sb_plan_text": ""})
                    if not pre.ok:
                        report.fail(probe_failure(pre, report.host, True, self._version))
                        return
                    self._probed(cfg, report, pre)
            if not self._segment(cfg, report, segment, remote, remote_results, mirror,
                                 imported, first):
                return
            first = False
        if report.ok and not cfg.keep_results:
            self._remove_remote(cfg, report, remote)

    def _remove_remote(self, cfg: HostConfig, report: HostReport, remote: str) -> None:
        """Every run came back and was imported: the host's folder of this fleet run goes
        (its data files take ~2x the host's memory; nothing else ever removes them)."""
        removed = self.runner.run(cfg.name, "remove", [
            {"name": "remove", "raw": "rm -rf -- {{ sb_remote | quote }}"}],
            {"sb_remote": remote})
        if not removed.ok:
            report.events.append(f"{remote} not removed from the host: {removed.message}")

    def _segment(self, cfg: HostConfig, report: HostReport, segment: Segment, remote: str,
                 remote_results: str, mirror: Path, imported: set[str], first: bool) -> bool:
        env = cfg.environment
        plan_path = f"{remote}/plan-{segment.number}.toml"
        pidfile = f"{remote}/stallbench-{segment.number}.pid"
        check_after = segment.planned_s + segment.runs * cfg.run_overhead_s
        budget = int(check_after * 3 + 600)
        argv = ["sh", "-c", 'echo $$ > "$0"; exec "$@"', pidfile, *cfg.command, "run",
                "--plan", plan_path, "--results", remote_results, "--no-progress"]
        if segment.boot:
            self.log(f"{cfg.name}: segment {segment.number}: "
                     f"{describe_boot(segment.boot)}, reboot")
        boot = boot_tasks(cfg, segment) if segment.boot else []
        started = self.runner.run(cfg.name, f"start{segment.number}", [
            *boot,
            probe_task(cfg, remote_results, plan_path),
            {"name": "start", "command": {"argv": argv}, "environment": env,
             "async": budget, "poll": 0, "vars": PYTHON_PROBED},
        ], {"sb_version": self._version, **self._python_vars(cfg),
            "sb_release": (segment.boot or {}).get("release", ""),
            "sb_plan_text": segment.text},
            timeout=900 + (cfg.reboot_timeout_s if boot else 0))
        if boot and boot_failed(report, segment, started, self._version):
            return False
        if not started.ok:
            if started.task("probe").get("failed") or not started.task("probe") \
                    or started.state == "unreachable" and "start" not in started.tasks:
                report.fail(probe_failure(started, report.host, first, self._version))
            else:
                kind = "disk full" if NO_SPACE_RE.search(started.message) else "could not start"
                report.fail(f"{kind}: {started.message}")
            return False
        self._probed(cfg, report, started)
        probe = probe_lines(started)
        boot_id, report.release = probe[1], probe[2]
        if boot_id not in report.boot_ids:
            report.boot_ids.append(boot_id)
        job = started.task("start").get("ansible_job_id")
        job_file = started.task("start").get("results_file", "")
        refused = job_problem(job, job_file)
        if refused is not None:      # nothing of it may reach a playbook: stop that run
            self._stop_remote(cfg, pidfile, plan_path)
            report.fail(f"segment {segment.number}: {refused}: refused; its stallbench was "
                        "sent SIGTERM (it undoes its own changes); nothing pulled")
            return False
        t0 = time.monotonic()
        self.log(f"{cfg.name}: segment {segment.number} started ({', '.join(segment.variants)}"
                 f" x{segment.iterations}); status check in {check_after:.0f} s")
        status = None
        if not self._sleep_until(t0 + check_after):
            status, lost_for = self._status(cfg, report, job, check_after, remote_results,
                                            mirror, job_file, boot_id)
        interrupted = self.stop.is_set()
        if interrupted and (status is None or not status.task("status").get("finished")):
            self._stop_remote(cfg, pidfile, plan_path)
            status, lost_for = self._status(cfg, report, job, check_after, remote_results,
                                            mirror, job_file, boot_id, honour_stop=False)
        if status is None:                         # never came back
            report.fail(
                f"connection lost during segment {segment.number} ({lost_for}); not back within "
                f"{cfg.reconnect_timeout_s:.0f} s: nothing pulled. Its stallbench runs on to "
                "the end of its plan and undoes its own changes; when the host is back run "
                f"`stallbench cleanup` there and copy {remote_results}")
            return False
        needs_cleanup = lost_for is not None
        if lost_for is not None:
            report.events.append(f"segment {segment.number}: connection lost ({lost_for}), "
                                 "back again")
        job_result = status.task("status")
        rc = job_result.get("rc")
        output = f"{job_result.get('stdout', '')}\n{job_result.get('stderr', '')}"
        fatal = False
        now_boot = (status.task("boot now").get("stdout_lines") or [""])[-1].strip()
        if now_boot and now_boot != boot_id:
            report.fail(f"segment {segment.number}: the host rebooted during the run "
                        f"(boot id {boot_id} -> {now_boot})")
            needs_cleanup = fatal = True
        elif not job_result.get("finished") and not interrupted:
            report.fail(f"segment {segment.number}: Ansible lost track of the job "
                        f"({job_result.get('msg', 'no result')})")
            needs_cleanup = fatal = True
        elif interrupted and rc == ExitCode.INTERRUPTED:
            report.fail(f"segment {segment.number}: stopped on request (SIGINT/SIGTERM to the "
                        "controller): its stallbench stopped and kept what it recorded")
        elif isinstance(rc, int) and rc < 0:
            report.fail(f"segment {segment.number}: its stallbench was killed (signal {-rc}) "
                        "during the run")
            needs_cleanup = True
        elif NO_SPACE_RE.search(output):
            report.fail(f"segment {segment.number}: disk full on the host: "
                        f"{last_line(NO_SPACE_RE, output)}")
            needs_cleanup = True
        elif rc not in (ExitCode.OK, None):
            detail = last_line(re.compile(r"failed|stallbench:"), output) or f"exit {rc}"
            report.fail(f"segment {segment.number}: stallbench exited {rc}: {detail}")
            needs_cleanup = rc != ExitCode.FAILURE
        elif job_result.get("failed"):         # e.g. Ansible's async time limit killed it
            report.fail(f"segment {segment.number}: {job_result.get('msg') or 'the job failed'}")
            needs_cleanup = True
        if needs_cleanup:
            cleanup = self.runner.run(cfg.name, f"cleanup{segment.number}", [
                {"name": "cleanup", "command": {"argv": [*cfg.command, "cleanup"]},
                 "environment": env, "vars": PYTHON_KNOWN}], self._python_vars(cfg))
            lines = cleanup.task("cleanup").get("stdout_lines", [])
            report.events.append(f"segment {segment.number}: `stallbench cleanup` there: "
                                 + ("; ".join(lines) if lines else cleanup.message or "done"))
        pulled = status
        if "pull" not in status.tasks or status.task("pull").get("skipped"):
            pulled = self.runner.run(cfg.name, f"pull{segment.number}",
                                     self._pull_tasks(cfg, remote_results, mirror),
                                     {"job": {"finished": 1, "rc": 0},
                                      **self._job_vars(job, job_file)})
        if pulled.task("pull").get("failed") or pulled.state == "unreachable" \
                or "pull" not in pulled.tasks:
            report.fail(f"segment {segment.number}: results not pulled: {pulled.message}")
            return False
        paths, problems = import_runs(mirror, self.results, cfg.name, imported, {
            "fleet_run": self.fleet_run, "boot_id": boot_id, "segment": segment.number,
            "remote_results": remote_results, "boot": segment.boot},
            skipped_by_rsync(pulled.task("pull").get("stdout_lines") or []))
        report.runs.extend(paths)
        report.events.extend(problems)
        for path in paths:
            run = load_run(path)
            if not run.complete:
                report.events.append(f"{path}: {run.describe_status()}")
        if not paths:
            report.fail(f"segment {segment.number}: no run came back from the host")
        return not fatal and not interrupted

    @staticmethod
    def _job_vars(job: str, job_file: str) -> dict[str, str]:
        """The job's id and file for the playbooks that name them (checked by job_problem)."""
        return {"sb_job": job, "sb_job_file": job_file}

    def _pull_tasks(self, cfg: HostConfig, remote_results: str,
                    mirror: Path) -> list[dict[str, Any]]:
        """rsync the host's results (never `fetch`: it holds files in memory), then read the
        boot id again and drop Ansible's job file (`sb_job_file`). Run only once the job has
        finished."""
        when = "job.finished | default(0) | int == 1 and job.rc | default(1) | int == 0"
        tidy = "rm -f -- {{ sb_job_file | quote }}"
        return [
            {"name": "pull", "ansible.posix.synchronize": {
                "mode": "pull", "src": f"{remote_results}/", "dest": f"{mirror}/",
                "use_ssh_args": True, "verify_host": True, **PULL_OPTIONS}, "when": when},
            {"name": "tidy", "raw": tidy, "when": when},
        ]

    def _sleep_until(self, deadline: float) -> bool:
        """Sleep (no traffic to the host); True when the user stopped the fleet run."""
        return self.stop.wait(max(0.0, deadline - time.monotonic()))

    def _status(self, cfg: HostConfig, report: HostReport, job: str, planned: float,
                remote_results: str, mirror: Path, job_file: str, boot_id: str,
                honour_stop: bool = True):
        """The one status check, with the pull when the job ended well (more checks only while
        the host overruns or does not answer). Returns (result or None when the host never came
        back, what the loss looked like)."""
        lost: str | None = None
        lost_since = 0.0
        recheck = min(60.0, max(5.0, planned * 0.1))
        started, give_up = time.monotonic(), planned * 3 + 600   # as the job's async limit
        while True:
            report.status_checks += 1
            result = self.runner.run(cfg.name, "status", [
                {"name": "status", "async_status": {"jid": "{{ sb_job }}"},
                 "failed_when": False, "register": "job", "vars": PYTHON_KNOWN},
                {"name": "boot now", "raw": shlex.join(["cat", cfg.boot_id_path])},
                *self._pull_tasks(cfg, remote_results, mirror),
            ], {**self._python_vars(cfg), **self._job_vars(job, job_file)})
            if result.state in ("unreachable", "error") and "status" not in result.tasks \
                    or result.task("status").get("unreachable"):
                if lost is None:
                    lost, lost_since = result.message, time.monotonic()
                    self.log(f"{cfg.name}: not answering ({lost}); retrying for "
                             f"{cfg.reconnect_timeout_s:.0f} s")
                if time.monotonic() - lost_since >= cfg.reconnect_timeout_s:
                    return None, lost
                time.sleep(min(10.0, max(1.0, cfg.reconnect_timeout_s / 10)))
                continue
            now = (result.task("boot now").get("stdout_lines") or [""])[-1].strip()
            if result.task("status").get("finished") or (honour_stop and self.stop.is_set()) \
                    or (now and now != boot_id):
                return result, lost
            if time.monotonic() - started > give_up:
                return result, lost
            if not honour_stop:
                time.sleep(2)
            elif self.stop.wait(recheck):
                return result, lost

    def _stop_remote(self, cfg: HostConfig, pidfile: str, plan_path: str) -> None:
        """Ctrl-C on the controller: SIGTERM to the host's stallbench (it keeps what it
        recorded and undoes its changes), if the pid is still that stallbench; the status
        checks that follow wait for it to end."""
        script = ('pid=$(cat "$0" 2>/dev/null) && [ -n "$pid" ] && '
                  'tr "\\0" " " < /proc/$pid/cmdline | grep -qF -- "$1" && kill -TERM "$pid"'
                  ' ; exit 0')
        self.runner.run(cfg.name, "stop", [
            {"name": "stop", "raw": shlex.join(["sh", "-c", script, pidfile, plan_path])}])


def run_fleet(plan: Plan, source: Path | list[str], log=print) -> FleetOutcome:
    return FleetRun(plan, source, log).run()
