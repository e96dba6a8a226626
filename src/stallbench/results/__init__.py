"""The run directory and its files: run.json, ops.parquet, summaries, spools, recovery."""
