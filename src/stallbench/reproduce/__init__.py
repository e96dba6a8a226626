"""`stallbench reproduce RESULTS`: a recorded result run again on this machine and compared
with the record (recipe.py: what the tree recorded and the checks; rerun.py: the runs and the
comparison; compare/agreement.py: then against now)."""
