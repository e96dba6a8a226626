"""What a reader of a guest run must be told (one fact, used by the runner and the comparison)."""

from __future__ import annotations

from typing import Any

TCG_NOTE = ("the guest's CPU was emulated (QEMU TCG, no KVM): absolute latencies are not "
            "comparable with real hardware; changes between kernels run the same way still "
            "are, with that caveat")


def guest_note(environment: dict[str, Any]) -> str | None:
    """The TCG caveat for a run whose environment says it ran in a TCG guest, else None."""
    vm = (environment or {}).get("vm") or {}
    return TCG_NOTE if vm.get("hypervisor") == "tcg" else None
