"""Pure statistics over numpy arrays: no file I/O, no printing, nothing else of stallbench
imported (tests/project/test_layers.py). One module per question:

quantiles     the statistics declared once (Stat, its direction and unit), percentiles
histogram     log-linear histograms of latencies (within 0.4%), their quantiles and ccdf
summary       what a run's summary holds (RunSummary, an OpSummary per op, the time blocks)
summarybuilder  that summary built from batches of ops in any order (blockarrays: its arrays)
transient     a run's start-up transient, where no warm-up was stated
stationarity  a level shift inside one run (median or rate)
intervals     the two-level model: 95% intervals of a change, the priors, runs needed
runstats      one run's statistic and its own variance from groups of time blocks
paired        duet runs' paired intervals
tdist         t and normal quantiles, Welch, p-values, Benjamini-Hochberg
change        a change with its interval, the Verdict enum and its words
means         a mean's change over few runs (the CPU rows)
noise         noise profiles: this host's measured run-to-run spread
interference  whether a variant's machine was busier or saturated with outside work
distrust      the predicates and sentences of the distrust rules
bands         log2 latency bands and the distribution shift
stalltimeline stalls over time: per-interval count, p99 and max, episodes, starved workers
montables     monitor tables -> deltas, rates or levels, and run.json's totals
delaykinds    the delay accounting kinds declared once
monitornames  the monitors' names, read by every floor
environment   what differed between the variants' machines (the inventories' diff)
heatmap       latency over time as 2-D histograms
folded        blocked-time profiles in the folded format, differences, flame-graph layout
hdr           HdrHistogram's bucket arithmetic
ratetracks    rates over time for the Perfetto export's counter tracks
windows       time windows of a trace export
changepoints  a series' change points (binary segmentation, two-level intervals)
axis          a series' order: kernel releases as versions, plan values as numbers
display       the display units, the one place they are chosen
where/        "where did the time go": the where section's steps (its face lists them)
"""
