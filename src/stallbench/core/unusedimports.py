"""Modules a process stallbench owns never needs, kept from being imported by others.

pyarrow asks, on its first `pa.array()` of a Python list, whether the list is a pandas object,
and to ask it imports pandas when pandas is installed: 0.3 s of every command here, and 7.0 s of
a guest run under QEMU TCG (`-X importtime`, pandas 3.1, a monitor table being built). No
command uses pandas; only the public API's `frame(..., "pandas")` does, in its caller's process,
where nothing here is called.
"""

from __future__ import annotations

import sys

NEVER_IMPORTED = ("pandas",)


class _NotImported:
    """`import pandas` fails with ModuleNotFoundError, which pyarrow takes as "not installed".
    (A None entry in sys.modules is not enough: Cython's import, pyarrow's, takes the None for
    the module.) A meta path finder is any object with find_spec; not importlib.abc's class,
    whose import (importlib.resources with it) costs every process 20 ms here and a guest run
    under QEMU TCG 0.4 s."""

    def find_spec(self, name: str, path: object, target: object = None) -> None:
        if name.partition(".")[0] in NEVER_IMPORTED:
            raise ModuleNotFoundError(f"stallbench does not use {name}", name=name)
        return None


def keep_unused_modules_out() -> None:
    """For the command line's and the guest job's process (and the workers they fork). A
    module already imported is left as it is."""
    if not any(isinstance(finder, _NotImported) for finder in sys.meta_path):
        sys.meta_path.insert(0, _NotImported())
