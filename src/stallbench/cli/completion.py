"""stallbench completion bash|zsh|fish — print the shell completion script shipped in the
package."""

from __future__ import annotations

import argparse
import sys
from importlib import resources

from ..core.errors import ExitCode
from .docs import PACKAGE_FILES, SHELLS


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "completion", description="Print the completion script for a shell. bash: "
        "`source <(stallbench completion bash)` in ~/.bashrc; zsh: `stallbench completion zsh "
        "> DIR/_stallbench` with DIR on $fpath; fish: `stallbench completion fish > "
        "~/.config/fish/completions/stallbench.fish`.")
    parser.add_argument("shell", choices=SHELLS, help="the shell")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    sys.stdout.write(script(args.shell))
    return ExitCode.OK


def script(shell: str) -> str:
    """The installed package's completion script for `shell`."""
    return resources.files("stallbench").joinpath(PACKAGE_FILES[shell]).read_text()
