"""`stallbench bisect`: the search, its steps, kernels built from a git tree, and its lines."""

DEFAULT_BOUND = "10%"    # --max-regression when neither it nor the resumed state gives one
