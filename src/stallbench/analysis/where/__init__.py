"""Where did the time go: the pure steps of the answer, one module per question (bcc's
one-tool-per-question), numpy and dicts in, the typed section out; no I/O, no printing.
compare/where/ loads the runs and calls them in this order; report/where.py renders the section.

section     the typed WhereSection and every record the steps fill (the comparison JSON's
            `where`; to_json / from_json); data only, so every step may use it
growth      which ops get a line (a statistic called worse, which leads; else p99, else mean,
            grew; or new) and how the line starts
counters    which kernel counters moved, per op and per second, and which only follow the ops
pressure    how long the tasks stalled on memory, I/O and CPU (PSI)
disk        what the devices did (diskstats: IOPS, bytes/s, time per request, utilisation)
delays      delay accounting attributed to the ops: the part of each sampled delay that must
            have been inside them, per worker role; faults the kernel's accounting can make
oncpu       the CPU side of each op: time on a CPU per op (kernel, user, per KiB) and whether
            the added op time was on a CPU, before any sleep is looked for
tracedstalls the reclaim and dirty-throttling stalls the tracepoints timed inside each op
            (exact)
mechanism   what the variant's own settings and counters name as the mechanism of a delay
device      the device or above it, per op, from the op's own I/O and the device's side
causes      one op's causes from stalls and delays, what grew against the baseline first
longest     the longest single delay of each kind (taskstats maxima), and when it is impossible
stacks      what the blocked stacks waited on, the top ones, where the candidate's left the
            baseline's
histograms  how long the traced waits lasted (log2 histograms)
slowops     where the slow ops' time went (trace intervals or stack samples)
explanations the one-line explanations ("read p99 +310%: ...") and the section's warnings
hotspots    where the cycles went: the function whose share of a role's on-CPU samples grew
            most, with its caller, in a line after the op's lines (compare/where/profiles.py)
perfstat    perf stat's counts per worker role and per op (IPC where there is a PMU)
"""
