"""The report's table model: one builder, three emitters (text, markdown, HTML) that show the same
cells; the cells checked against the raw ops.parquet and run.json rusage by hand."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from test_compare_report import make_results, section

from stallbench.cli import main
from stallbench.report.tables import LEFT, RIGHT, Cell, Column, Section, Table
from stallbench.report.text import section_lines

pytestmark = pytest.mark.pure


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    results = tmp_path_factory.mktemp("results")
    make_results(results)
    out = tmp_path_factory.mktemp("out")
    for fmt in ("text", "markdown", "html", "json"):
        assert main(["compare", "vanilla", "memcg", "--results", str(results), "--format", fmt,
                     "--output", str(out / f"report.{fmt}")]) == 0
    texts = {fmt: (out / f"report.{fmt}").read_text()
             for fmt in ("text", "markdown", "html", "json")}
    return results, texts


def markdown_tables(md: str) -> dict[str, list[list[str]]]:
    """heading -> body rows (cells stripped) of the table right under it."""
    out, title = {}, None
    for line in md.splitlines():
        if line.startswith("## "):
            title = line[3:]
            out[title] = []
        elif title and line.startswith("|") and not line.startswith("|---"):
            out[title].append([c.strip() for c in line.strip("|").split("|")])
    return {t: rows[1:] for t, rows in out.items() if rows}


def html_tables(page: str) -> dict[str, list[list[str]]]:
    out = {}
    for title, table in re.findall(r"<h2>([^<]*)</h2>\s*<div class=\"scroll\"><table>(.*?)"
                                   r"</table>", page, re.S):
        rows = re.findall(r"<tr>(.*?)</tr>", table)
        out[html.unescape(title)] = [
            [html.unescape(re.sub(r"<[^>]+>", "", c)).strip()
             for c in re.findall(r"<td[^>]*>(.*?)</td>", row)] for row in rows[1:]]
    return out


def raw_count(results: Path, variant: str, op: str) -> int:
    n = 0
    for path in (results / variant).glob("*/*/ops.parquet"):
        n += int((np.array(pq.read_table(path, columns=["op"]).column("op").to_pylist())
                  == op).sum())
    return n


def test_markdown_and_html_show_the_cells_the_text_shows(reports):
    results, texts = reports
    md, page = markdown_tables(texts["markdown"]), html_tables(texts["html"])
    title = next(t for t in md if t.startswith("read — latency in "))
    assert title.endswith("(memcg vs vanilla)")
    assert [[c.replace("**", "") for c in row] for row in md[title]] == page[title]
    rows = {row[0]: [c.replace("**", "") for c in row] for row in md[title]}
    base, cand = raw_count(results, "vanilla", "read"), raw_count(results, "memcg", "read")
    assert rows["samples"][1:4] == [f"{base:,}", f"{cand:,}", f"{(cand / base - 1) * 100:+.1f}%"]
    text_rows = {line.split()[0]: line for line in section(texts["text"], "read — latency")}
    for stat in ("p50", "p90", "p99", "p99.9", "mean", "max"):
        # the text row holds the same value, change, interval and verdict cells
        for cell in rows[stat][1:]:
            assert cell in text_rows[stat], (stat, cell)
    assert "**FEWER OPS**" in texts["markdown"]
    assert '<span class="starved">FEWER OPS</span>' in texts["html"]


def test_cpu_table_is_the_mean_rusage_of_the_runs(reports):
    results, texts = reports
    means = {}
    for variant in ("vanilla", "memcg"):
        metas = [json.loads(p.read_text()) for p in (results / variant).glob("*/*/run.json")]
        means[variant] = {k: np.mean([m["rusage"][k] for m in metas])
                          for k in ("user_s", "system_s", "elapsed_s")}
    title = "CPU time of the workload's processes (seconds per iteration)"
    for table in (markdown_tables(texts["markdown"])[title], html_tables(texts["html"])[title]):
        rows = {row[0]: row for row in table}
        for name, key in (("User", "user_s"), ("System", "system_s"), ("Elapsed", "elapsed_s")):
            assert rows[name][1:3] == [f"{means['vanilla'][key]:.2f}",
                                       f"{means['memcg'][key]:.2f}"]
            assert rows[name][3] == f"{(means['memcg'][key] / means['vanilla'][key] - 1):+.1%}"


def test_text_emitter_pads_and_cuts_as_the_columns_say():
    table = Table([Column("", LEFT, 4, 2), Column("a-long-title", RIGHT, 6),
                   Column("free", LEFT)],
                  [[Cell("x"), Cell("12345678"), Cell("worse", "worse", "STARVED")],
                   [Cell("yy"), Cell("1"), Cell("")]])
    lines = section_lines(Section("title", [table], ["a note"]), width=40)
    assert lines == ["title",
                     "       a-long free",
                     "  x    12345678 worse  STARVED",
                     "  yy        1",
                     "  a note", ""]
