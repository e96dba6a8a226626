"""Turning recorded runs into a comparison (floor 4 of docs/architecture.md).

comparison.py builds the Comparison (model.py) in named steps: loading.py (the runs'
summaries, each op's sides), changes.py (each statistic's change and interval), verdicts/
(the false-discovery budget and the verdict words), counters.py (the counters timelines),
stalltimeline.py (stalls over time), where/ (where did the time go), views.py and blocked.py (the
pictures' data). Beside it, for the other commands that read runs as a comparison does:
metrics.py (what --metric OP:STAT names), gate.py (`check`, bisect's steps and `--iterations
auto`: the comparison the metrics are judged in and their outcomes), show.py (`show` of one
variant) and calibration.py (`calibrate`: a noise profile from A/A runs); series.py (`series`:
runs as points along an axis, their changes and change points) and query.py (`query`: DuckDB
views).
"""

DEFAULT_NOISE = 0.02   # changes smaller than this are never called better/worse (--noise)
