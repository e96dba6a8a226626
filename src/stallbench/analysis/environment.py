"""What differed between the variants' machines besides the settings the plan changed.

Input: per variant label, the run.json `environment` of each of its runs (env/machinestate.py fills
`environment.inventory`; env/sysctl.py, env/scheduler.py and env/loopfs.py record what the plan
set). Output: a JSON-able dict (see `environment_diff`). Pure: no I/O.
"""

from __future__ import annotations

import re
from typing import Any

# differences here make the comparison measure the machine rather than the change: warn loudly
MUST_EQUAL = ("cpu.model", "cpu.count", "cpu.online", "cpu.governor", "cpu.driver", "cpu.boost",
              "cpu.smt")
# names that differ from run to run by construction (loop device numbers, image paths)
_IGNORED = {"version", "filesystem.mount_point", "device.loop_backing_file"}
_LOOP_RE = re.compile(r"^(/dev/)?loop\d+$")
_STORAGE_KEYS = ("type", "size", "mkfs_opts", "mount_opts")


def flatten(inventory: dict[str, Any]) -> dict[str, str]:
    """{'cpu': {'model': 'X'}, 'sysctl': {'vm.swappiness': '60'}} ->
    {'cpu.model': 'X', 'sysctl.vm.swappiness': '60'}; lists become one string."""
    flat: dict[str, str] = {}
    for section, facts in inventory.items():
        if section in _IGNORED:
            continue
        if not isinstance(facts, dict):
            flat[section] = str(facts)
            continue
        for key, value in facts.items():
            name = f"{section}.{key}"
            if name in _IGNORED:
                continue
            if isinstance(value, list):
                value = ";".join(",".join(f"{k}={v}" for k, v in item.items())
                                 if isinstance(item, dict) else str(item) for item in value)
            text = str(value)
            if _LOOP_RE.match(text):
                text = _LOOP_RE.sub(lambda m: (m.group(1) or "") + "loop", text)
            flat[name] = text
    return flat


def planned_settings(environment: dict[str, Any]) -> dict[str, Any]:
    """What the plan set for one run, from its run.json environment: the storage it chose
    (a loop filesystem with its options, or a directory), sysctls and the I/O scheduler."""
    fs = environment.get("filesystem") or {}
    if "mkfs_opts" in fs:                                  # a loop filesystem made for the run
        storage: tuple[str, ...] = ("fs", *(str(fs.get(k)) for k in _STORAGE_KEYS))
    else:
        storage = ("dir", str(fs.get("dir")))
    sysctls: dict[str, str] = {}
    for key, entry in (environment.get("sysctls") or {}).items():
        if isinstance(entry, dict):
            sysctls[key] = str(entry.get("new"))
            for name in entry:
                if name.startswith("old "):          # the coupled partner (dirty_ratio/bytes)
                    sysctls.setdefault(name[4:], "(coupled to " + key + ")")
    scheduler = (environment.get("scheduler") or {}).get("new")
    reserved = (environment.get("system_memory") or {}).get("requested")
    if reserved is not None:                     # --system-memory holds huge pages
        sysctls["vm.nr_hugepages"] = f"(system_memory {reserved})"
    return {"storage": storage, "sysctls": sysctls, "scheduler": scheduler}


def _planned_prefixes(settings: list[dict[str, Any]]) -> set[str]:
    """Keys (or 'section.' prefixes) a difference in which the plan explains."""
    planned: set[str] = set()
    if len({s["storage"] for s in settings}) > 1:
        planned |= {"device.", "filesystem."}
    names = {k for s in settings for k in s["sysctls"]}
    for name in names:
        if len({s["sysctls"].get(name) for s in settings}) > 1:
            planned.add(f"sysctl.{name}")
    if len({s["scheduler"] for s in settings}) > 1:
        planned.add("device.scheduler")
    return planned


def _is_planned(key: str, planned: set[str]) -> bool:
    return key in planned or any(p.endswith(".") and key.startswith(p) for p in planned)


def _values(flats: list[dict[str, str]], key: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(f.get(key, "(not recorded)") for f in flats))


def environment_diff(environments: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Compare the recorded environment of each variant (label -> its runs' environments; the
    first label is the baseline).

    Returns {"compared": [labels with an inventory], "missing": [labels without one],
    "facts": number of facts compared, "differences": [{key, values: {label: value},
    planned, must_equal}] (unplanned first, must-equal first among them),
    "within": {label: [keys that differed between that variant's own runs]}}.
    A variant whose runs disagree shows its values joined with ' | '.
    """
    flats: dict[str, list[dict[str, str]]] = {}
    missing: list[str] = []
    settings: list[dict[str, Any]] = []
    for label, envs in environments.items():
        runs = [flatten(e["inventory"]) for e in envs
                if isinstance(e, dict) and isinstance(e.get("inventory"), dict)]
        if runs:
            flats[label] = runs
            settings.extend(planned_settings(e) for e in envs if isinstance(e, dict))
        else:
            missing.append(label)
    result: dict[str, Any] = {"compared": list(flats), "missing": missing, "facts": 0,
                              "differences": [], "within": {}}
    if not flats:
        return result
    planned = _planned_prefixes(settings)
    keys = sorted({k for runs in flats.values() for f in runs for k in f})
    result["facts"] = len(keys)
    differences = []
    for key in keys:
        per_label = {label: _values(runs, key) for label, runs in flats.items()}
        for label, values in per_label.items():
            if len(values) > 1 and not _is_planned(key, planned):
                result["within"].setdefault(label, []).append(key)
        if len(flats) < 2 or len(set(per_label.values())) == 1:
            continue
        differences.append({
            "key": key,
            "values": {label: " | ".join(values) for label, values in per_label.items()},
            "planned": _is_planned(key, planned),
            "must_equal": key in MUST_EQUAL,
        })
    differences.sort(key=lambda d: (d["planned"], not d["must_equal"], d["key"]))
    result["differences"] = differences
    return result
