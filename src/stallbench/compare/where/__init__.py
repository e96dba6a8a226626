"""Where did the time go: the comparison's where section, from what the monitors of each
variant's runs left (tables, run.json, the slow ops read back from ops.parquet), through the
steps of analysis/where/. I/O only; the analysis is analysis/where/'s.

Its entry points are `build` (the typed WhereSection, the comparison's `where`) and `explain`
(its JSON form), in assembly.py; variantdata.py loads a variant's monitor tables and totals,
facts.py its conditions and workers, stalldata.py its traced stalls matched to its ops and
slowopdata.py its slow ops; report/where.py builds the report's tables from the typed section.
"""

from .assembly import build, explain

__all__ = ["build", "explain"]
