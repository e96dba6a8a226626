"""The version of stallbench, declared once (pyproject.toml reads it; the package re-exports it)."""

__version__ = "0.3.0"
