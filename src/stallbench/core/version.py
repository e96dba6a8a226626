"""The version of stallbench, declared once: pyproject.toml reads it, the package re-exports it,
run.json, every JSON document and the JSON schemas' `$id` carry it (scripts/gen-cli-docs.py
writes it into the schemas; tests/core/test_version.py holds them to it), and CHANGELOG.md
has a heading for it."""

__version__ = "0.6.0"


def schema_id(name: str) -> str:
    """A JSON schema's `$id`: its file name under this release, e.g.
    'stallbench/0.6.0/comparison.schema.json'."""
    return f"stallbench/{__version__}/{name}"
