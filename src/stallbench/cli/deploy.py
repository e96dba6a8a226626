"""stallbench deploy --hosts INVENTORY — this controller's stallbench on every host (the work is
in fleet/deploy.py)."""

from __future__ import annotations

import argparse
import sys

from ..core.errors import ExitCode


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "deploy", description="Install this controller's stallbench (the same version and "
        "code, with the dependencies it runs with here) on every host of an Ansible inventory, "
        "in a virtual environment of its own (host variable stallbench_venv, default "
        "/opt/stallbench/VERSION), downloading nothing on the hosts: the wheels are made here "
        "and copied. A fleet run (run --plan --hosts) then uses that stallbench.")
    parser.add_argument("--hosts", metavar="INVENTORY", required=True,
                        help="an Ansible inventory file, or SSH targets separated by commas")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..fleet.deploy import deploy
    from ..settings.hosts import check_hosts_option

    reports = deploy(check_hosts_option(args.hosts),
                     log=lambda line: print(line, file=sys.stderr, flush=True))
    for report in reports:
        print(f"  {report.host}: {'ok' if report.ok else 'FAILED'}: {report.message}")
    failed = [r.host for r in reports if not r.ok]
    if failed:
        print(f"stallbench: deploy: {len(failed)} of {len(reports)} host(s) failed: "
              f"{', '.join(failed)}", file=sys.stderr)
        return ExitCode.FAILURE
    return ExitCode.OK
