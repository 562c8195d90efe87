"""A picture of water area through time, from an occurrence run's dates."""

from __future__ import annotations

from pathlib import Path

from ..formats import PLOT_FILE
from ..io import atomic_path, check_output


def plot_water_area(dates: list, path, overwrite: bool = False) -> Path:
    """A PNG of each date's water area (km2), in date order (dates without one in given order)."""
    import matplotlib  # heavy: only the plot needs it

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = check_output(path, overwrite, kind=PLOT_FILE)
    labels = [d.date or Path(d.source).stem for d in dates]
    fig, ax = plt.subplots(figsize=(max(5, 0.5 * len(dates) + 2), 3.2), dpi=120)
    ax.plot(range(len(dates)), [d.water_km2 for d in dates], marker="o", color="#1f5fa8")
    ax.set_xticks(range(len(dates)), labels, rotation=45, ha="right", fontsize=8)
    ax.set_ylabel("water (km2)")
    ax.set_title("Water area through time (s2s2net occurrence)")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png")
    plt.close(fig)
    return path
