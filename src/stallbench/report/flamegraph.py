"""Flame graphs as self-contained SVG (no script, no external resource): one box per frame,
as wide as the blocked time (or the on-CPU samples) through it, root at the bottom; hover shows
the frame's numbers.
The differential one is as wide as the second profile and coloured by the change per run of
each frame's own time (the stacks that end at it) relative to the frame's width: red where
blocked time grew, blue where it shrank (analysis/folded.Frame.own_change)."""

from __future__ import annotations

import hashlib
import html

from ..analysis.folded import Frame, layout

WIDTH = 1200
ROW = 17
PAD = 10
TOP = 48
FONT = 11
CHAR_W = 6.2
MIN_SHARE = 0.0005


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _warm(name: str) -> str:
    digest = hashlib.blake2s(name.encode(), digest_size=3).digest()
    return f"rgb({205 + digest[0] % 50},{80 + digest[1] % 130},{digest[2] % 55})"


def _diff_colour(change: float) -> str:
    """Frame.own_change -> red (grew) or blue (shrank), saturated at the frame's whole size."""
    strength = min(1.0, abs(change))
    fade = int(235 - 190 * strength)
    if change > 0:
        return f"rgb(255,{fade},{fade})"
    if change < 0:
        return f"rgb({fade},{fade},255)"
    return "rgb(235,235,235)"


def _svg(frames: list[Frame], total: float, title: str, subtitle: str, colour, tip,
         what: str = "blocked time") -> str:
    depth = max((f.depth for f in frames), default=0) + 1
    lines = subtitle.split("\n")
    top = TOP + 14 * (len(lines) - 1)
    height = top + depth * ROW + PAD * 2
    scale = (WIDTH - 2 * PAD) / total if total else 0.0
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
           f'viewBox="0 0 {WIDTH} {height}" font-family="Verdana,sans-serif" '
           f'font-size="{FONT}" role="img" aria-label="{_e(title)}">',
           f'<rect width="{WIDTH}" height="{height}" fill="#fafafa"/>',
           f'<text x="{WIDTH / 2}" y="20" text-anchor="middle" font-size="15">{_e(title)}</text>',
           *(f'<text x="{WIDTH / 2}" y="{38 + 14 * i}" text-anchor="middle" fill="#555">'
             f'{_e(line)}</text>' for i, line in enumerate(lines))]
    if not frames:
        out.append(f'<text x="{WIDTH / 2}" y="{top + ROW}" text-anchor="middle">'
                   f'no {_e(what)} recorded</text>')
    for frame in frames:
        x = PAD + frame.x * scale
        w = frame.width * scale
        y = height - PAD - (frame.depth + 1) * ROW
        out.append(f'<g class="frame"><title>{_e(tip(frame))}</title>'
                   f'<rect x="{x:.2f}" y="{y}" width="{max(w - 0.5, 0.1):.2f}" '
                   f'height="{ROW - 1}" rx="2" fill="{colour(frame)}"/>')
        chars = int((w - 6) / CHAR_W)
        if chars >= 3:
            label = frame.name if len(frame.name) <= chars else frame.name[:chars - 2] + ".."
            out.append(f'<text x="{x + 3:.2f}" y="{y + ROW - 5}">{_e(label)}</text>')
        out.append("</g>")
    out.append("</svg>\n")
    return "\n".join(out)


def render(counts: dict[str, int], title: str, unit: str, what: str = "blocked time") -> str:
    frames, total = layout(counts, min_share=MIN_SHARE)

    def tip(frame: Frame) -> str:
        share = frame.after / total if total else 0.0
        return f"{frame.name}\n{frame.after:,.0f} {unit} ({share:.1%})"

    return _svg(frames, total, title, f"total {total:,.0f} {unit}; width = share of it",
                lambda f: _warm(f.name), tip, what)


def render_differential(a, b) -> str:
    """a, b: blocked.Profile of the baseline and the candidate (counts per run compared)."""
    after = {k: v / b.runs for k, v in b.counts.items()}
    before = {k: v / a.runs for k, v in a.counts.items()}
    frames, total = layout(after, before, min_share=MIN_SHARE)

    def tip(frame: Frame) -> str:
        change = (f"{frame.after / frame.before - 1:+.0%}" if frame.before
                  else "new")
        return (f"{frame.name}\n{a.label}: {frame.before:,.0f}, {b.label}: {frame.after:,.0f} "
                f"{a.unit} per run ({change}); its own (stacks ending here): "
                f"{frame.own_before:,.0f} -> {frame.own_after:,.0f}")

    subtitle = (f"width: {b.label} ({total:,.0f} {b.unit} per run)\n"
                f"colour: the change of each frame's own time (the stacks ending at it) "
                f"relative to its width; red: more than in {a.label}, blue: less; deepest "
                f"when all of it is new or gone")
    return _svg(frames, total, f"{b.what}: {b.label} vs {a.label}", subtitle,
                lambda f: _diff_colour(f.own_change), tip, b.what)


def html_sections(comparison) -> list[str]:
    """The differential flame graph of each candidate against the baseline, inline SVG."""
    views = getattr(comparison, "views", None)
    out = []
    blocked = views.flames if views is not None else []
    on_cpu = views.cpu_flames if views is not None else []
    if blocked or on_cpu:   # as wide as the page, but never so narrow that the names vanish
        out.append("<style>.flame svg{width:100%;height:auto;min-width:640px}</style>")
    for heading, pairs in (("Where tasks blocked", blocked), ("Where tasks ran on a CPU", on_cpu)):
        for a, b in pairs:
            out.append(f"<h2>{heading}: {_e(b.label)} vs {_e(a.label)} "
                       "(differential flame graph)</h2>")
            out.append('<div class="scroll flame">' + render_differential(a, b) + "</div>")
    return out
