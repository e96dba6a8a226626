"""`stallbench export`: one module per format (perfetto, csvout, folded, hdr). Each takes the
runs of a RUN_OR_VARIANT argument and writes to a binary or text stream; bundle takes a whole
results tree and writes one archive (results/bundle.py reads it)."""

FORMATS = ("perfetto", "csv", "folded", "hdr", "bundle")
FOLDED_STACKS = ("blocked", "on-cpu")   # folded --stacks: where tasks blocked, or ran
DEFAULT_MAX_EVENTS = 500_000    # perfetto: slices per export without --max-events
