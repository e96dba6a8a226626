"""Hostile input for every importer (issue 7 item 6): garbage, truncated and binary logs give
one UsageError naming the file (and line), never another exception."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stallbench.core.errors import UsageError
from stallbench.importers import IMPORTERS, parse_log

pytestmark = pytest.mark.oracle

VALID = {
    "mmtests-pgioperf": ("pgioperf.log",
                         "wal[12155]: avg: 0.0 msec; max: 0.1 msec time: 10.5\n"
                         "commit[12155]: avg: 0.2 msec; max: 15.4 msec time: 11.0\n"
                         "read[12157]: avg: 0.3 msec; max: 9.4 msec time: 12.25\n"),
    "strace": ("strace.txt",
               "100  1700000000.000000 read(3,  <unfinished ...>\n"
               "101  1700000000.000100 write(1, \"x\", 1) = 1 <0.000010>\n"
               "100  1700000000.000500 <... read resumed>\"abc\", 3) = 3 <0.000700>\n"
               "101  1700000000.001000 --- SIGCHLD {si_signo=SIGCHLD} ---\n"
               "102  1700000000.003000 exit_group(0)     = ?\n"
               "102  1700000000.003100 +++ exited with 0 +++\n"),
    "fio": ("x_lat.1.log",
            "0, 244704, 0, 4096, 503808, 0\n1, 69604, 1, 4096, 6209536, 0\n"
            "2, 53590, 0, 4096, 7069696, 0\n"),
    "pgbench": ("pgbench_log.77",
                "0 0 1500 0 1700000000 500000\n1 0 failed 0 1700000001 0\n"
                "1 1 2500 0 1700000001 100000 10 0\n"),
}

_FUZZ = settings(max_examples=120, deadline=None,
                 suppress_health_check=[HealthCheck.function_scoped_fixture])


def _parse(kind: str, name: str, data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_bytes(data)
        try:
            imported = parse_log(kind, path)
        except UsageError as exc:
            message = str(exc)
            assert name in message, message
            assert "\n" not in message, message
            return
        assert len(imported.samples) > 0
        assert min(imported.samples.latency_ns) >= 0


def test_valid_samples_parse() -> None:
    expected = {"mmtests-pgioperf": 3, "strace": 2, "fio": 3, "pgbench": 2}
    for kind, (name, text) in VALID.items():
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / name
            path.write_text(text)
            assert len(parse_log(kind, path).samples) == expected[kind], kind


@_FUZZ
@given(kind=st.sampled_from(sorted(IMPORTERS)), data=st.binary(max_size=400))
def test_binary_garbage(kind: str, data: bytes) -> None:
    _parse(kind, VALID[kind][0], data)


@_FUZZ
@given(kind=st.sampled_from(sorted(IMPORTERS)),
       text=st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=300))
def test_text_garbage(kind: str, text: str) -> None:
    _parse(kind, VALID[kind][0], text.encode("utf-8"))


@_FUZZ
@given(kind=st.sampled_from(sorted(IMPORTERS)), cut=st.integers(min_value=0, max_value=400))
def test_truncated_valid_log(kind: str, cut: int) -> None:
    name, text = VALID[kind]
    _parse(kind, name, text.encode()[:cut])


@_FUZZ
@given(kind=st.sampled_from(sorted(IMPORTERS)), data=st.data())
def test_valid_log_with_a_mutated_line(kind: str, data) -> None:
    """Replace one field-ish token of a valid log with hostile values (huge, negative, NaN)."""
    name, text = VALID[kind]
    tokens = text.split(" ")
    index = data.draw(st.integers(min_value=0, max_value=len(tokens) - 1))
    tokens[index] = data.draw(st.sampled_from(
        ["-1", "nan", "inf", "1e400", "99999999999999999999999", "", "\x00", "0x10", "[", "<",
         "<unfinished ...>", "= ?", "msec;", "\n", "\t"]))
    _parse(kind, name, " ".join(tokens).encode())
