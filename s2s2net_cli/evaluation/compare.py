"""A comparison: every model scored on the same pairs and pixels, its predictions kept in a
folder or a temporary one, and a picture of them if asked."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Callable

from ..formats import PLOT_FILE
from ..io import check_folder_output, check_output
from ..manifest import Pair
from ..rulebook import refuse
from ..sources.degraded import check_factor
from ..sources.options import SceneOptions
from .evaluate import ModelScores, evaluate
from .report import plot_comparison


def compare(models: list, pairs: list[Pair], nodata: float | None = None, scene_options: SceneOptions | None = None,
            save_predictions=None, plot=None, on_progress: Callable[[str, str], None] | None = None,
            degrade: int | None = None, overwrite: bool = False) -> list[ModelScores]:
    """Score ``models`` on ``pairs`` (each scene degraded ``degrade`` x first, by Wald's protocol,
    when given). The 2 m predictions go to ``save_predictions`` (else a temporary folder, and
    each image's "prediction" is None); ``plot`` names a PNG of scenes, references and predictions
    (an existing one replaced only with ``overwrite``)."""
    if not pairs:
        raise refuse("S2N-PAIRS-MISSING")
    if degrade is not None:  # before any pair is opened: a factor out of range is the option's fault
        check_factor(degrade)
    if plot:
        check_output(plot, overwrite, [path for p in pairs for path in (p.image, p.mask)], kind=PLOT_FILE)
    if save_predictions:
        check_folder_output(save_predictions)
    with tempfile.TemporaryDirectory(prefix="s2s2net-eval-") as tmp:
        predictions = Path(save_predictions) if save_predictions else Path(tmp)
        results = evaluate(models, pairs, predictions, nodata, on_progress, scene_options, degrade)
        if plot:
            plot_comparison(plot, pairs, results, predictions, scene_options=scene_options, nodata=nodata,
                            degrade=degrade)
    if not save_predictions:
        for r in results:
            for img in r.images:
                img["prediction"] = None
    return results
