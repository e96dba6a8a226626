"""Parsers of the logs and outputs of external programs, one module per format: fio (per-IO
latency logs, JSON), pgbench (per-transaction logs, summary output), strace (-T output). Both the
live workloads (workloads/fio.py, pgbench.py, command.py) and the importers (importers/) read
them with these; loglines.py has the file:line errors and the tail of a growing log, samples.py
the compact op arrays every parser fills."""
