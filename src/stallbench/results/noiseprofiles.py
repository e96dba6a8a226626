"""Noise profiles on disk: RESULTS/noise-profiles/<host>/<shape>.json (analysis/noise.py says
what one holds). They live with the results, so a comparison read elsewhere (the fleet's
controller, a colleague's copy) finds the profile of the host its runs came from."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..analysis.noise import NoiseProfile, shape_key
from ..core.jsonfile import write_json_atomic
from .runmeta import RunMeta

PROFILE_DIR = "noise-profiles"


def run_shape(meta: RunMeta) -> str:
    """The shape of a run: workload, its options, length and the settings that change what
    it measures."""
    return shape_key(meta.workload, dict(meta.params or {}), run_settings(meta))


def run_settings(meta: RunMeta) -> dict[str, Any]:
    environment = meta.environment or {}
    filesystem = environment.get("filesystem") or {}
    return {
        "memory_limit": environment.get("memory_limit"),
        "sysctls": environment.get("sysctls") or {},
        "fs": filesystem.get("type") if isinstance(filesystem, dict) else None,
        "duration_s": meta.duration_planned_s,
        "warmup_s": meta.warmup_s,
        "vm": bool(environment.get("vm")),
        # runs whose start-up transient was found measure another stretch of the run than a
        # stated warm-up's (the key only where found: the shapes of earlier profiles stay)
        **({"warmup_found": True} if meta.warmup_found else {}),
    }


def profile_path(results: Path, host: str, shape: str, duet: bool = False) -> Path:
    return results / PROFILE_DIR / (host or "unknown-host") / \
        f"{shape}{'-duet' if duet else ''}.json"


def save_profile(results: Path, profile: NoiseProfile) -> Path:
    path = profile_path(results, profile.host, profile.shape, profile.duet)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, profile.to_json())
    return path


def find_profile(results: Path, meta: RunMeta, duet: bool = False
                 ) -> tuple[NoiseProfile | None, str | None]:
    """The profile (`duet`: the duet profile) of this run's host and shape, if one was made:
    (profile, None), or (None, why a file that is there cannot be used), or (None, None) when
    there is none."""
    path = profile_path(results, meta.host or "", run_shape(meta), duet)
    if not path.is_file():
        return None, None
    try:
        data: Any = json.loads(path.read_text())
        profile = NoiseProfile.from_json(data, str(path))
        if profile.duet != duet:
            raise ValueError("a duet profile and a sequential one swapped names")
        return profile, None
    except (OSError, ValueError) as exc:
        return None, f"noise profile {path} not used: {exc}"
