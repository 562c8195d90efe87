"""A picture of water area through time, from an occurrence run's dates."""

from __future__ import annotations

from pathlib import Path

from ..formats import PLOT_FILE
from ..io import atomic_path, check_output

SEEN_WHOLE = 0.99  # a date seen over at least this share of the grid is drawn as seen whole
COLOUR = "#1f5fa8"


def plot_water_area(dates: list, path, overwrite: bool = False) -> Path:
    """A PNG of each date's water area (km2), in date order (dates without one in given order)."""
    path = check_output(path, overwrite, kind=PLOT_FILE)
    fig = water_area_figure(dates)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return path


def water_area_figure(dates: list):
    """The figure of plot_water_area: a date seen whole is a filled dot; one seen in part
    (clouds, nodata, off the grid) a hollow one with its seen share beside it, for its area is
    only what was seen: a floor, not the water of the whole place."""
    import matplotlib  # heavy: only the plot needs it

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [d.date or Path(d.source).stem for d in dates]
    areas = [d.water_km2 for d in dates]
    fig, ax = plt.subplots(figsize=(max(5, 0.5 * len(dates) + 2), 3.2), dpi=120)
    ax.plot(range(len(dates)), areas, color=COLOUR, zorder=1)
    whole = [k for k, d in enumerate(dates) if d.valid_share >= SEEN_WHOLE]
    part = [k for k, d in enumerate(dates) if d.valid_share < SEEN_WHOLE]
    ax.scatter(whole, [areas[k] for k in whole], color=COLOUR, zorder=2, label="seen whole")
    if part:
        ax.scatter(part, [areas[k] for k in part], facecolor="white", edgecolor=COLOUR, zorder=2,
                   label="seen in part (clouds, nodata): the water seen, a floor")
        for k in part:
            ax.annotate(f"{dates[k].valid_share:.0%} seen", (k, areas[k]), textcoords="offset points", xytext=(0, 7),
                        ha="center", fontsize=7, color="#555555")
        ax.legend(fontsize=7, loc="best")
    ax.margins(x=0.08, y=0.15)
    ax.set_xticks(range(len(dates)), labels, rotation=45, ha="right", fontsize=8)
    ax.set_ylabel("water (km2)")
    ax.set_title("Water area through time (s2s2net occurrence)")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig
