"""`stallbench bisect`: the search, its steps, and kernels built from a git tree."""

DEFAULT_BOUND = "10%"    # --max-regression when neither it nor the resumed state gives one
