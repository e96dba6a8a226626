"""`stallbench bisect`: the search, its steps, and kernels built from a git tree."""
