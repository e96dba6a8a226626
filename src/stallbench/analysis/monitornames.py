"""The monitors' names, declared once where every floor can read them (analysis/ imports no
monitors/): monitors/__init__.py builds its registry and each monitor class its `name` from
them; the where section (compare/where/) and the mechanism (mechanism.py) read run.json's
`monitors` by them."""

COUNTERS = "counters"
PSI = "psi"
DISKSTATS = "diskstats"
DELAY = "delay"
STACKS = "stacks"
RECLAIM = "reclaim"
TRACE = "trace"
TRACE_FULL = "trace-full"
PROFILE = "profile"          # on-CPU call stacks (perf record)
PERFSTAT = "perfstat"        # CPU counters per thread (perf stat)

STACK_MONITORS = (STACKS, TRACE, TRACE_FULL)   # the monitors that record where tasks blocked
TRACE_MONITORS = (TRACE, TRACE_FULL)           # the tracefs ones (reclaim throttling too)
# the monitors whose tables time each reclaim and throttling stall (their table names)
STALL_TABLES = {RECLAIM: "reclaim", TRACE: "trace", TRACE_FULL: "trace_full"}
