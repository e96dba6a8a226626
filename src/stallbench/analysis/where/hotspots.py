"""Where the cycles went: the profile monitor's on-CPU samples per worker role, the functions
most of them were in, and the one whose share grew most against the baseline, named in a where
line right after the op's other lines:

    read: 41% of the reader workers' CPU samples in rep_movs_alternative (12% in the baseline),
      from filemap_read

A sample is counted in its innermost frame (the function that was running: self time, as
`perf report --no-children` counts), and the line names that function's most frequent caller.
A function is named only where its share grew by at least MIN_SHARE_GROWTH and by MIN_Z
standard errors of the difference of two proportions (samples taken close together are not
independent, hence the high bar). Pure.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from .. import monitornames
from .growth import MIN_GROWTH, NOT_DECIDED
from .section import Explanation, FunctionShare, Hotspot, RoleProfile

TOP_FUNCTIONS = 5         # the functions a role's profile table shows
MIN_SHARE_GROWTH = 0.05   # of the role's samples: less is not named
MIN_Z = 4.0               # standard errors the share must have grown by
MIN_SAMPLES = 20          # samples in the function, in the candidate, to name it


def leaf(stack: str) -> str:
    return stack.rsplit(";", 1)[-1]


def caller(stack: str) -> str | None:
    frames = stack.split(";")
    return frames[-2] if len(frames) > 1 else None


def leaf_counts(stacks: Mapping[str, int]) -> dict[str, int]:
    """Folded stacks -> samples per innermost function."""
    out: dict[str, int] = {}
    for stack, count in stacks.items():
        name = leaf(stack)
        out[name] = out.get(name, 0) + int(count)
    return out


def top_caller(stacks: Mapping[str, int], function: str) -> str | None:
    """The frame that most of the samples in `function` (as the innermost frame) were called
    from; None where it is always the outermost."""
    callers: dict[str, int] = {}
    for stack, count in stacks.items():
        if leaf(stack) == function and (name := caller(stack)) is not None:
            callers[name] = callers.get(name, 0) + int(count)
    return max(sorted(callers), key=callers.__getitem__) if callers else None


def role_profile(role: str, stacks: Mapping[str, int], event: str) -> RoleProfile:
    """A role's samples and the TOP_FUNCTIONS functions most of them were in."""
    leaves = leaf_counts(stacks)
    total = sum(leaves.values())
    top = sorted(leaves.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP_FUNCTIONS]
    return RoleProfile(role, total, event,
                       [FunctionShare(name, n, n / total, top_caller(stacks, name))
                        for name, n in top] if total else [])


def hotspot(base: Mapping[str, int], here: Mapping[str, int]) -> Hotspot | None:
    """The innermost function whose share of the samples grew most from `base` to `here`
    (folded stacks of one role), where it grew enough to name (see the module docstring)."""
    base_leaves, here_leaves = leaf_counts(base), leaf_counts(here)
    n_base, n_here = sum(base_leaves.values()), sum(here_leaves.values())
    if not n_base or not n_here:
        return None
    best: tuple[float, str] | None = None
    for name, count in here_leaves.items():
        share, base_share = count / n_here, base_leaves.get(name, 0) / n_base
        growth = share - base_share
        if growth < MIN_SHARE_GROWTH or count < MIN_SAMPLES:
            continue
        pooled = (count + base_leaves.get(name, 0)) / (n_here + n_base)
        error = math.sqrt(pooled * (1 - pooled) * (1 / n_here + 1 / n_base))
        if error > 0 and growth / error < MIN_Z:
            continue
        if best is None or (growth, name) > best:
            best = (growth, name)
    if best is None:
        return None
    name = best[1]
    return Hotspot(name, here_leaves[name] / n_here, base_leaves.get(name, 0) / n_base,
                   top_caller(here, name), here_leaves[name], base_leaves.get(name, 0),
                   n_here, n_base)


def role_words(roles: Sequence[str]) -> str:
    return " and ".join(roles)


def hotspot_line(op: str, roles: Sequence[str], spot: Hotspot) -> str:
    """'read: 41% of the reader workers' CPU samples in rep_movs_alternative (12% in the
    baseline), from filemap_read'."""
    text = (f"{op}: {spot.share:.0%} of the {role_words(roles)} workers' CPU samples in "
            f"{spot.function} ({spot.base_share:.0%} in the baseline)")
    return text + (f", from {spot.caller}" if spot.caller else "")


def profile_lines(label: str, tail_changes: Mapping[str, Sequence],
                  roles_of_op: Mapping[str, Sequence[str]],
                  profiles: Mapping[str, RoleProfile]) -> list[Explanation]:
    """The hotspot line of each op whose change (tail_changes[op][1], as explanations.py reads a
    TailChange) grew by more than MIN_GROWTH, where the role that runs it has a hotspot;
    marked "(not decided): if real," where the comparison did not decide the change."""
    out = []
    for op, tail in sorted(tail_changes.items()):
        change = tail[1]
        roles = [r for r in roles_of_op.get(op, []) if r in profiles]
        if change is None or change <= MIN_GROWTH or len(roles) != 1:
            continue
        spot = profiles[roles[0]].hotspot
        if spot is None:
            continue
        text = hotspot_line(op, roles, spot)
        if len(tail) > 2 and not tail[2]:
            text = f"{op}{NOT_DECIDED} {text.removeprefix(f'{op}: ')}"
        out.append(Explanation(label, op, text))
    return out


def after_their_ops(explanations: Sequence[Explanation], lines: Sequence[Explanation]
                    ) -> list[Explanation]:
    """`explanations` with each of `lines` right after the last line of its variant and op, or
    where the op has none, after its variant's last line about an op (else at the end)."""
    out = list(explanations)
    for line in lines:
        same_op = [i for i, e in enumerate(out) if (e.variant, e.op) == (line.variant, line.op)]
        same_variant = [i for i, e in enumerate(out)
                        if e.variant == line.variant and e.op is not None]
        at = (same_op or same_variant or [len(out) - 1])[-1] + 1
        out.insert(at, line)
    return out


def naming_hint(monitors_here: Sequence[str], monitors_base: Sequence[str]) -> str | None:
    """What would name the function a CPU-bound op's time went to, where the profile monitor
    did not run on both sides (`Facts.monitors` of each); None where it did."""
    if monitornames.PROFILE in monitors_here and monitornames.PROFILE in monitors_base:
        return None
    return f"--monitors default,{monitornames.PROFILE} would name the function"
