"""PNG plots for docs/benchmarks.md (matplotlib, headless)."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib

matplotlib.use("Agg")
from typing import TYPE_CHECKING

import matplotlib.pyplot as plt

if TYPE_CHECKING:
    from pathlib import Path

Series = dict[str, tuple[Sequence[float], Sequence[float]]]


def _save(fig: plt.Figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def lines(
    path: Path,
    title: str,
    xlabel: str,
    ylabel: str,
    series: Series,
    *,
    logy: bool = False,
    hline: tuple[float, str] | None = None,
) -> Path:
    """One line per series: {label: (xs, ys)}."""
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    for label, (xs, ys) in series.items():
        ax.plot(list(xs), list(ys), label=label, linewidth=1.6)
    if hline is not None:
        ax.axhline(hline[0], color="grey", linestyle="--", linewidth=1, label=hline[1])
    if logy:
        ax.set_yscale("log")
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, path)


def bars(
    path: Path,
    title: str,
    ylabel: str,
    groups: Sequence[str],
    series: dict[str, Sequence[float]],
    *,
    hline: tuple[float, str] | None = None,
    ylim: tuple[float, float] | None = None,
) -> Path:
    """Grouped bars: one group per entry of ``groups``, one bar per series."""
    fig, ax = plt.subplots(figsize=(max(7.5, 1.1 * len(groups) * max(1, len(series)) / 2), 4.2))
    width = 0.8 / max(1, len(series))
    for i, (label, values) in enumerate(series.items()):
        xs = [g + (i - (len(series) - 1) / 2) * width for g in range(len(groups))]
        rects = ax.bar(xs, list(values), width, label=label)
        ax.bar_label(rects, fmt="%.2f", fontsize=6, padding=1)
    ax.set_xticks(range(len(groups)), list(groups), fontsize=8)
    if hline is not None:
        ax.axhline(hline[0], color="grey", linestyle="--", linewidth=1, label=hline[1])
    if ylim is not None:
        ax.set_ylim(*ylim)
    ax.set(title=title, ylabel=ylabel)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, path)
