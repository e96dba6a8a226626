"""signals.held_while_starting: a real SIGINT/SIGTERM sent inside the block reaches the previous
handler only after the block, so a child started inside it is always known to the caller."""

import os
import signal
import subprocess

import pytest

from stallbench.core.signals import held_while_starting

pytestmark = pytest.mark.pure


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_signal_inside_the_block_is_raised_after_it(signum):
    seen: list[str] = []

    def previous(n, _frame):
        seen.append("handler")
        raise KeyboardInterrupt

    old = signal.signal(signum, previous)
    proc = None
    try:
        with pytest.raises(KeyboardInterrupt):
            with held_while_starting():
                os.kill(os.getpid(), signum)
                proc = subprocess.Popen(["sleep", "30"])   # Python code: handlers would run here
                seen.append("started")
        assert seen == ["started", "handler"]
        assert signal.getsignal(signum) is previous       # the previous handler is back
    finally:
        signal.signal(signum, old)
        if proc is not None:
            proc.kill()
            proc.wait()


def test_no_signal_no_effect():
    with held_while_starting():
        value = 1 + 1
    assert value == 2
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
