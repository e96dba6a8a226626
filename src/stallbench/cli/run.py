"""`stallbench run WORKLOAD [options]` and `stallbench run --plan FILE`."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from .. import verbosity
from ..errors import UsageError
from ..monitors import monitors_help, parse_monitor_list
from ..plan import (
    SCHEDULERS,
    Plan,
    VariantSettings,
    check_io_weight,
    parse_io_latency,
    parse_io_max,
    parse_swap_limit,
    parse_sysctl_assignment,
    parse_warmup,
)
from ..units import parse_duration, parse_size
from ..workloads import available_workloads, get_workload
from .common import add_results_argument, print_comparison, results_dir

DEFAULT_DURATION = "30s"


def register(subparsers) -> None:
    parser = subparsers.add_parser("run", description="Run a workload and record every operation.")
    parser.add_argument("--plan", type=Path, help="a TOML plan with several variants")
    parser.add_argument("--hosts", metavar="INVENTORY",
                        help="run the plan on these hosts through Ansible: an inventory file "
                             "or user@host,... (see README: fleet)")
    add_results_argument(parser)
    parser.add_argument("--no-progress", action="store_true", help="no live progress display")
    parser.add_argument("--iterations", dest="plan_iterations", metavar="auto",
                        help="with --plan: 'auto' adds interleaved rounds until --metric is "
                             "decided (better, worse or same) for every candidate")
    parser.add_argument("--max-iterations", type=int, metavar="N",
                        help="with --iterations auto: at most N rounds (10)")
    parser.add_argument("--metric", action="append", metavar="OP:STAT",
                        help="with --iterations auto: a metric that decides (repeatable)")
    workloads = parser.add_subparsers(dest="workload", metavar="WORKLOAD",
                                      parser_class=type(parser))
    for name in available_workloads():
        try:
            cls = get_workload(name)
        except UsageError:
            continue
        sub = workloads.add_parser(name, help=cls.help, description=cls.help)
        _add_variant_arguments(sub)
        cls.add_arguments(sub)
    parser.set_defaults(func=run)


def _add_variant_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("run and variant options")
    group.add_argument("--variant", help="name of this configuration (default: uname -r)")
    # SUPPRESS: given before the workload name, the run parser's value must survive
    group.add_argument("--results", type=Path, default=argparse.SUPPRESS,
                       help="results directory (default: $STALLBENCH_RESULTS or ./results)")
    group.add_argument("--duration", default=DEFAULT_DURATION,
                       help=f"length of each run with a unit: 500ms, 30s, 2m, 1h; a bare number "
                            f"is seconds ({DEFAULT_DURATION})")
    group.add_argument("--iterations", type=int, default=1, help="runs of the variant (1)")
    group.add_argument("--warmup", default=None, metavar="DURATION",
                       help="run this long first, recorded but left out of the statistics "
                            "(default: the workload's, e.g. pgioperf 1s; randread 0)")
    group.add_argument("--monitors", default=None, help=monitors_help())
    group.add_argument("--no-progress", action="store_true", default=argparse.SUPPRESS,
                       help="no live progress display")
    where = group.add_mutually_exclusive_group()
    where.add_argument("--dir", type=Path, help="existing directory for the workload's files")
    where.add_argument("--fs", choices=["ext2", "ext3", "ext4", "xfs", "btrfs"],
                       help="make this filesystem on a loop device for the run (root)")
    group.add_argument("--fs-size", help="loop filesystem size (default: what the workload "
                                         "needs plus the filesystem's own overhead)")
    group.add_argument("--mkfs-opts", default="", help="options for mkfs")
    group.add_argument("--mount-opts", default="", help="options for mount -o")
    group.add_argument("--work-dir", type=Path, help="where loop images live")
    group.add_argument("--keep-image", action="store_true", help="keep the loop image")
    group.add_argument("--memory", help="memory cgroup limit for the workload, e.g. 512M (root)")
    group.add_argument("--system-memory",
                       help="leave only about this much memory available system-wide (root)")
    group.add_argument("--sysctl", action="append", default=[], metavar="KEY=VALUE",
                       help="set a sysctl for the run (repeatable; root)")
    group.add_argument("--scheduler", metavar="NAME",
                       help=f"I/O scheduler for the device under the dir: one of "
                            f"{', '.join(SCHEDULERS)} that the device offers (root)")
    group.add_argument("--no-drop-caches", action="store_true",
                       help="keep the page cache (default as root: sync and drop the page "
                            "cache, dentries and inodes machine-wide before each run)")
    group.add_argument("--kernel", metavar="IMAGE_OR_DEB",
                       help="boot this kernel (bzImage, linux-image-*.deb or unpacked dir) under "
                            "QEMU and run the workload in the guest")
    group.add_argument("--vm-cpus", type=int, help="the guest's vCPUs (with --kernel; 2)")
    group.add_argument("--vm-memory", help="the guest's memory (with --kernel; 1G)")
    # cgroup knobs: env/memknobs.py, env/iocgroup.py
    group.add_argument("--memory-high", help="cgroup v2 memory.high for the workload (root)")
    group.add_argument("--memory-soft-limit",
                       help="cgroup v1 memory.soft_limit_in_bytes for the workload (root)")
    group.add_argument("--swap-limit", help="swap the workload may use, e.g. 0 or 256M (root)")
    group.add_argument("--io-max", metavar="rbps=N,wbps=N,riops=N,wiops=N",
                       help="throttle I/O to the device under the directory (root; cgroup v2 "
                            "io.max or v1 blkio.throttle)")
    group.add_argument("--io-weight", type=int, help="I/O weight 1-10000 (root; io.weight)")
    group.add_argument("--io-latency", metavar="TIME",
                       help="cgroup v2 io.latency target on the device, e.g. 5ms (root)")


_RUN_KEYS = {"variant", "results", "duration", "iterations", "warmup", "monitors",
             "plan_iterations", "max_iterations", "metric",
             "no_progress", "dir",
             "fs", "fs_size", "mkfs_opts", "mount_opts", "work_dir", "keep_image", "memory",
             "system_memory", "sysctl", "scheduler", "no_drop_caches", "plan", "workload",
             "func", "command", "kernel", "vm_cpus", "vm_memory", "hosts",
             "memory_high", "memory_soft_limit", "swap_limit", "io_max",
             "io_weight", "io_latency"}


def plan_from_args(args: argparse.Namespace) -> Plan:
    """Flags of `stallbench run WORKLOAD ...` -> a one-variant Plan."""
    from ..store import check_name

    sysctls = dict(parse_sysctl_assignment(item) for item in args.sysctl)
    if args.iterations < 1:
        raise UsageError("--iterations must be at least 1")
    variant = VariantSettings(
        name=check_name(os.uname().release if args.variant is None else args.variant),
        dir=args.dir,
        fs=args.fs,
        fs_size=parse_size(args.fs_size, "--fs-size") if args.fs_size else None,
        mkfs_opts=args.mkfs_opts,
        mount_opts=args.mount_opts,
        work_dir=args.work_dir,
        keep_image=args.keep_image,
        memory=parse_size(args.memory, "--memory") if args.memory else None,
        system_memory=(parse_size(args.system_memory, "--system-memory")
                       if args.system_memory else None),
        sysctls=sysctls,
        scheduler=args.scheduler,
        drop_caches=not args.no_drop_caches,
        **_vm_settings(args),
        memory_high=parse_size(args.memory_high, "--memory-high") if args.memory_high else None,
        memory_soft_limit=(parse_size(args.memory_soft_limit, "--memory-soft-limit")
                           if args.memory_soft_limit else None),
        swap_limit=parse_swap_limit(args.swap_limit) if args.swap_limit else None,
        io_max=parse_io_max(args.io_max) if args.io_max else {},
        io_weight=check_io_weight(args.io_weight) if args.io_weight is not None else None,
        io_latency_us=parse_io_latency(args.io_latency) if args.io_latency else None,
    )
    options = {k: v for k, v in vars(args).items() if k not in _RUN_KEYS}
    return Plan(
        workload=args.workload,
        workload_options=options,
        variants=[variant],
        duration_s=parse_duration(args.duration, "--duration"),
        iterations=args.iterations,
        warmup_s=parse_warmup(args.warmup) if args.warmup is not None else None,
        monitors=parse_monitor_list(args.monitors),
        results=results_dir(args),
    )


def _until_decided(args: argparse.Namespace, plan: Plan) -> None:
    """--iterations auto [--max-iterations N] [--metric OP:STAT] over a plan's own keys."""
    if args.plan_iterations is not None and args.plan_iterations != "auto":
        raise UsageError(f"--iterations {args.plan_iterations!r} with --plan: only 'auto' "
                         "(the plan file sets a number)")
    auto = args.plan_iterations == "auto" or plan.until_decided is not None
    if not auto:
        if args.max_iterations or args.metric:
            raise UsageError("--max-iterations and --metric go with --iterations auto")
        return
    if args.metric:
        plan.until_decided = args.metric
    elif plan.until_decided is None:
        raise UsageError("--iterations auto needs --metric OP:STAT (e.g. --metric read:p99)")
    if args.max_iterations is not None:
        if not 1 <= args.max_iterations <= 10_000:
            raise UsageError("--max-iterations must be between 1 and 10000")
        plan.iterations = args.max_iterations
    elif plan.until_decided is not None and args.plan_iterations == "auto" \
            and plan.iterations == 1:
        plan.iterations = 10


def _vm_settings(args: argparse.Namespace) -> dict:
    from ..plan import check_plain_path, check_vm_cpus, check_vm_memory

    if args.kernel is None:
        if args.vm_cpus is not None or args.vm_memory is not None:
            raise UsageError("--vm-cpus and --vm-memory only make sense with --kernel")
        return {}
    if args.dir is not None:
        raise UsageError("--kernel runs on the guest's own virtual disk; leave out --dir "
                         "(--fs chooses the disk's filesystem)")
    return {"kernel": str(check_plain_path(args.kernel, "--kernel")),
            "vm_cpus": None if args.vm_cpus is None else check_vm_cpus(args.vm_cpus),
            "vm_memory": (check_vm_memory(parse_size(args.vm_memory, "--vm-memory"))
                          if args.vm_memory else None)}


def run(args: argparse.Namespace) -> int:
    if args.plan:
        if args.workload:
            raise UsageError("give either --plan FILE or a WORKLOAD, not both")
        from ..plan import load_plan

        plan = load_plan(args.plan)
        if args.results:
            plan.results = args.results
        _until_decided(args, plan)
        if args.hosts or plan.hosts or any(v.hosts for v in plan.variants):
            from .fleet import run_fleet_plan
            return run_fleet_plan(plan, args.hosts)
    elif args.hosts:
        raise UsageError("--hosts goes with --plan FILE: write the variants in a plan")
    elif args.workload:
        if args.plan_iterations or args.max_iterations or args.metric:
            raise UsageError("--iterations auto compares variants: use it with --plan "
                             "(stallbench run --plan PLAN --iterations auto --metric OP:STAT)")
        plan = plan_from_args(args)
    else:
        raise UsageError("name a workload (" + ", ".join(available_workloads())
                         + ") or give --plan FILE")
    get_workload(plan.workload).from_options(plan.workload_options)
    from ..runner import run_plan

    outcomes = run_plan(plan, progress=not args.no_progress, log=verbosity.info)
    names = list(dict.fromkeys(v.name for v in plan.variants))
    # a variant without a complete run (its kernel did not boot, ...) was reported above
    names = [n for n in names if any(o.variant == n and o.status == "complete" for o in outcomes)]
    if len(names) > 1:
        print_comparison(names[0], names[1:], plan.results, workload=plan.workload)
    else:
        for outcome in outcomes:
            print(f"{outcome.path}: {outcome.status}"
                  + (f" ({outcome.reason})" if outcome.reason else ""))
    statuses = {o.status for o in outcomes}
    if "interrupted" in statuses:
        return 130
    if "failed" in statuses:
        print("stallbench: some runs failed; see run.json of each", file=sys.stderr)
        return 1
    return 0
