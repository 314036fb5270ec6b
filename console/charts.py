"""Small inline SVG charts, with the numbers beside them as a table (for screen readers
and for copying)."""

from __future__ import annotations

from console.page import esc, table

__all__ = ["line_chart"]

WIDTH, HEIGHT, PAD = 360, 140, 28
COLOURS = ["#2563eb", "#d97706", "#059669", "#db2777"]


def line_chart(title: str, unit: str, series: dict[str, list[tuple[str, int]]]) -> str:
    """One line per series over the union of their days; empty series say so."""
    days = sorted({day for points in series.values() for day, _ in points})
    if not days:
        return (
            f'<figure class="chart"><figcaption>{esc(title)}</figcaption>'
            "<p>No data yet.</p></figure>"
        )
    top = max((v for points in series.values() for _, v in points), default=0) or 1
    x_of = {d: PAD + i * (WIDTH - 2 * PAD) / max(len(days) - 1, 1) for i, d in enumerate(days)}

    def y(value: int) -> float:
        return HEIGHT - PAD - value * (HEIGHT - 2 * PAD) / top

    lines, legend = [], []
    for n, (name, points) in enumerate(series.items()):
        colour = COLOURS[n % len(COLOURS)]
        coords = " ".join(f"{x_of[d]:.1f},{y(v):.1f}" for d, v in sorted(points))
        dots = "".join(
            f'<circle cx="{x_of[d]:.1f}" cy="{y(v):.1f}" r="2.5" fill="{colour}">'
            f"<title>{esc(name)} {esc(d)}: {v:,} {esc(unit)}</title></circle>"
            for d, v in sorted(points)
        )
        lines.append(
            f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{coords}"/>{dots}'
        )
        swatch = f'<span class="swatch" style="background:{colour}"></span>'
        legend.append(f"<li>{swatch}{esc(name)}</li>")
    axes = (
        f'<line x1="{PAD}" y1="{HEIGHT - PAD}" x2="{WIDTH - PAD}" y2="{HEIGHT - PAD}" '
        'class="axis"/>'
        f'<text x="{PAD}" y="{HEIGHT - 8}" class="tick">{esc(days[0])}</text>'
        f'<text x="{WIDTH - PAD}" y="{HEIGHT - 8}" class="tick" text-anchor="end">'
        f"{esc(days[-1])}</text>"
        f'<text x="{PAD}" y="{PAD - 8}" class="tick">{top:,} {esc(unit)}</text>'
    )
    rows = [
        [esc(day)] + [esc(f"{dict(points).get(day, 0):,}") for points in series.values()]
        for day in days
    ]
    numbers = table(["day", *series], rows)
    return (
        f'<figure class="chart"><figcaption>{esc(title)}</figcaption>'
        f'<svg viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{esc(title)}">'
        f"{axes}{''.join(lines)}</svg>"
        f'<ul class="legend">{"".join(legend)}</ul>'
        f"<details><summary>Numbers</summary>{numbers}</details></figure>"
    )
