"""Pure statistics over numpy arrays: no file I/O, no printing.

quantiles   summary statistics of one latency sample and whether a percentile is resolvable
histogram   log-linear histograms (per-run summaries whose cost does not grow with the samples)
intervals   95% intervals for changes (order statistics within one run, bootstrap over runs),
            multiple-comparison adjustment and the verdict words
bands       log2 latency bands, distribution shift in words, probability of superiority
stalls      per-interval count/p99/max, stall episodes, longest stall, per-worker counts
"""
