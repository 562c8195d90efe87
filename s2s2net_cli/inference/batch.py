"""Predicting a list of scenes: where each output goes, and running them in one process or
shared among the ranks of a launcher.

Output paths follow rio and GDAL users' habits: an existing folder, or a path ending in a
separator, is a folder (each scene's mask is ``<name>_water.tif`` in it, ``<name>`` being the
file's stem or a STAC item's id), whatever the number of scenes; any other path is the one
scene's file, named .tif (or .tiff, or with no suffix, as GDAL allows: predict writes
GeoTIFF). With --skip-existing an existing output is skipped only when its tags say it was
made from the same scene; another scene's mask there is a failure, never a silent skip.
Under a launcher (deepspeed --module, torchrun: RANK and WORLD_SIZE set) several scenes are
dealt out among the ranks, one scene has its rows of tiles shared (``shared_scene``), and
rank 0 gathers every rank's results into one summary.
"""

from __future__ import annotations

import os
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from ..bands import BAND_NAMES
from ..errors import S2S2NetError
from ..formats import GEOTIFF_SUFFIXES, check_each_source_once, check_exists, safe_name, source_name, source_stem
from ..io import check_not_inputs, make_folder
from ..rulebook import code_of, option, refuse
from ..sources import stac
from ..sources.dates import SOURCE_TAG, raster_tags
from ..sources.open import open_scene
from ..weights_header import default_weights, weights_tags
from ..world import World
from .beside import Beside
from .options import PredictOptions
from .writer import made_with, reading_tags

if TYPE_CHECKING:  # the network and torch load only when a scene is predicted
    from .predictor import Predictor, SceneResult

# one rank may wait for another's share of a whole scene
PROCESS_GROUP_TIMEOUT = timedelta(hours=12)


@dataclass
class BatchSummary:
    """What a batch made: each scene written, skipped (its output existed) or failed, and
    whether it was interrupted (the signal's number) before the end."""

    scenes: list[dict] = field(default_factory=list)
    skipped: list[dict] = field(default_factory=list)
    failures: list[dict] = field(default_factory=list)
    interrupted: int | None = None

    def to_dict(self) -> dict:
        out = {"scenes": self.scenes, "skipped": self.skipped, "failures": self.failures}
        return out | ({"interrupted": True} if self.interrupted else {})


def is_folder(output) -> bool:
    """Whether ``output`` names a folder: it exists as one, or ends in a path separator."""
    text = str(output)
    return text.endswith(("/", os.sep)) or Path(text).is_dir()


def output_name(scene) -> str:
    """The stem of the outputs named after ``scene``: a STAC item's id, else its source_stem."""
    text = str(scene)
    ident = stac.item_id(text) if stac.is_item(text) else None
    return safe_name(ident) if ident else source_stem(text)


def output_targets(scenes: list, output) -> list[tuple]:
    """(scene, output path) for each scene: ``output`` itself for one scene written to a file;
    ``<name>_water.tif`` in the folder ``output`` otherwise (UsageError when several scenes
    are given a file or a .tif name, one scene a file name of another format, or two would
    share a name, or none is given)."""
    if not scenes:  # a glob that matched nothing: nothing would be written, without a word
        raise refuse("S2N-SCENES-MISSING")
    folder = Path(output)
    suffix = folder.suffix.lower()
    if len(scenes) == 1 and not is_folder(output):
        if suffix not in GEOTIFF_SUFFIXES:
            raise refuse("S2N-OUTPUT-NOT-TIF", folder)
        return [(scenes[0], folder)]
    given = ", ".join(Path(str(s)).name for s in scenes[:3]) + (", ..." if len(scenes) > 3 else "")  # a stray one shows
    if folder.exists() and not folder.is_dir():
        raise refuse("S2N-OUTPUT-IS-FILE", folder, names=given)
    if not folder.exists() and not is_folder(output) and suffix and suffix in GEOTIFF_SUFFIXES:
        raise refuse("S2N-OUTPUT-NEEDS-FOLDER", folder, count=len(scenes), names=given)
    check_each_source_once(scenes)  # one scene twice would be mapped twice into one output
    names = [f"{output_name(s)}_water.tif" for s in scenes]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        same = [s for s, n in zip(scenes, names) if n == twice[0]]
        raise refuse("S2N-OUTPUT-SAME-NAME", None, first=same[0], second=same[1], target=folder / twice[0])
    return [(s, folder / n) for s, n in zip(scenes, names)]


def finished_output(scene, target, made_with: dict | None = None) -> bool:
    """Whether ``target`` already holds the finished mask of ``scene`` made as ``made_with``
    says (the MADE_WITH tags this run would write: what --skip-existing skips): False when it
    does not exist; OutputExistsError when it holds another scene's mask, one made with another
    model, threshold, prior or kind of values, or from the scene read another way (other bands,
    scale, offset, clouds, pixels left out or area of interest: a batch re-run with other settings
    would mix two runs' masks), or a file predict did not write, rather than skipping it."""
    if not Path(target).exists():
        return False
    tags, name = raster_tags(target), source_name(scene)  # SOURCE_TAG: its scene; MADE_WITH's: how
    made_from = tags.get(SOURCE_TAG)
    if made_from != name:
        if made_from:
            raise refuse("S2N-OUTPUT-OTHER-SCENE", target, other=made_from, name=name)
        raise refuse("S2N-OUTPUT-NOT-A-MASK", target, name=name)
    differ = [k for k in (made_with or {}) if k in tags and tags[k] != made_with[k]]
    if differ:
        was = ", ".join(f"{k} {tags[k]}" for k in differ)
        now = ", ".join(f"{k} {made_with[k]}" for k in differ)
        raise refuse("S2N-OUTPUT-OTHER-MODEL", target, name=name, was=was, now=now)
    return True


def predict_batch(scenes: list, output, options: PredictOptions, beside_vector=None, beside_rivers=None,
                  skip_existing: bool = False, world: World = World(), progress: Callable | None = None,
                  on_result: Callable[[SceneResult], None] | None = None,
                  on_failure: Callable[[S2S2NetError], None] | None = None) -> BatchSummary | None:
    """Predict ``scenes`` (a local STAC ItemCollection standing for its items) into ``output``
    (a mask file for one scene, else a folder), with their water polygons (``beside_vector``)
    and rivers (``beside_rivers``) beside each mask when given:
    what ``s2s2net predict`` does. Every output is checked before the first scene runs (none
    may be an input; an existing one is refused unless ``options.overwrite``, or skipped with
    ``skip_existing`` when it holds that scene's mask). The summary on rank 0, None elsewhere;
    ``progress``, ``on_result`` (before what goes beside) and ``on_failure`` as predict_scenes."""
    if options.overwrite and skip_existing:
        raise refuse("S2N-OPTIONS-EXCLUSIVE", None, first=option("overwrite"), second=option("skip_existing"))
    scenes = stac.expand_collections(scenes)  # a saved STAC search: each of its items
    targets = output_targets(scenes, output)
    beside = Beside(beside_vector, beside_rivers, one_file=len(scenes) == 1 and not is_folder(output),
                    overwrite=options.overwrite)
    masks = [target for _, target in targets]
    # a scene's mask (or polygons, rivers) written over another scene, its --mask or its AOI
    check_not_inputs([*masks, *(path for mask in masks for path in beside.paths(mask))],
                     (*scenes, options.scene.leave_out, options.scene.aoi))
    for mask in masks:
        if not (skip_existing and mask.exists()):
            beside.check(mask)
    if beside.rivers:  # a scene whose mask rivers would refuse, before any is written
        from ..hydrology.rivers import check_measurable  # heavy: geopandas, which rivers needs anyway

        for scene, mask in targets:
            if not (skip_existing and mask.exists()):
                try:
                    read = open_scene(scene, options.scene, len(BAND_NAMES))
                except S2S2NetError:  # an unreadable scene fails in its turn, as without --rivers
                    continue
                check_measurable(scene, read.crs, read.transform, read.width, read.height, scene=True)
    weights = options.weights or default_weights()

    def make_predictor() -> Predictor:
        from .predictor import Predictor  # heavy: torch, when the first scene is predicted

        return Predictor(weights, options, world)

    def after(result: SceneResult) -> None:
        if on_result:
            on_result(result)
        result.beside = beside.write(result.output)

    identity = weights_tags(weights, options.flips, options.threshold) if skip_existing else {}

    def tags_of(scene) -> dict:  # what --skip-existing compares, known from the weights' header alone
        return {**made_with(identity, options.probability),
                **reading_tags(open_scene(scene, options.scene, len(BAND_NAMES)))}

    return predict_scenes(make_predictor, targets, world, progress, after, on_failure, skip_existing,
                          lambda mask: beside.write(mask, missing_only=True), tags_of=tags_of)


def predict_scenes(make_predictor: Callable[[], Predictor], targets: list[tuple], world: World = World(),
                   progress: Callable | None = None,
                   after: Callable[[SceneResult], None] | None = None,
                   on_failure: Callable[[S2S2NetError], None] | None = None,
                   skip_existing: bool = False,
                   on_skipped: Callable[[Path], dict | None] | None = None,
                   tags_of: Callable[[object], dict] | None = None) -> BatchSummary | None:
    """Predict each (scene, output) of ``targets``; the summary on rank 0, None on the others.

    ``make_predictor()`` makes the Predictor when the first scene needs it (once): a batch of
    missing scenes or finished masks loads no model. ``tags_of(scene)`` gives the tags
    ``skip_existing`` compares (default: the predictor's).

    ``progress(name, quiet)`` gives a context manager yielding an ``on_tile(done, total)``
    callback (or None); ``after(result)`` runs for each scene written (vectors, say). A scene
    that fails goes to ``on_failure`` and the failures; the others go on. With
    ``skip_existing`` a scene whose output already holds its mask is skipped (one holding another
    scene's mask is a failure: finished_output), and ``on_skipped(output)`` runs for it (what a
    run stopped before making beside a mask: its vectors; what it returns joins the skipped entry). Ctrl-C or SIGTERM ends the batch
    with what finished (``interrupted``).
    """
    if world.is_shared:
        world.join(PROCESS_GROUP_TIMEOUT)
    share_one = world.is_shared and len(targets) == 1  # one scene: its rows of tiles are shared
    if len(targets) > 1:  # the folder of several outputs
        for folder in {Path(target).parent for _, target in targets}:
            make_folder(folder)
    summary = BatchSummary()
    made: list = []

    def predictor() -> Predictor:
        if not made:
            made.append(make_predictor())
        return made[0]

    try:
        for scene, target in (targets if share_one else targets[world.rank::world.size]):
            try:
                check_exists(scene)
                if skip_existing and Path(target).exists() and finished_output(
                        scene, target, tags_of(scene) if tags_of else predictor().made_with(scene)):
                    beside = on_skipped(Path(target)) if on_skipped and (world.leads or not share_one) else None
                    summary.skipped.append({"scene": str(scene), "output": str(target), **(beside or {})})
                    continue
                _predict_one(predictor(), scene, target, world, share_one, progress, after, summary)
            except S2S2NetError as exc:
                if share_one and not world.leads:  # rank 0 reports the shared scene
                    continue
                if on_failure:
                    on_failure(exc)
                summary.failures.append({"scene": str(scene), "error": str(exc), "code": code_of(exc),
                                         "exit_code": exc.exit_code})
    except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM: what finished is reported, the rest is not
        summary.interrupted = getattr(exc, "signum", 2)
        return summary if world.leads else None
    if world.is_shared:  # one summary, from rank 0, of every rank's scenes
        from .shared_scene import gather_on_rank0  # torch.distributed

        parts = gather_on_rank0([summary.scenes, summary.skipped, summary.failures], world)
        summary = BatchSummary(*parts)
        World.leave()
        if not world.leads:
            return None
    return summary


def _predict_one(predictor: Predictor, scene, target, world: World, share_one: bool, progress, after,
                 summary: BatchSummary) -> None:
    progress = progress or (lambda name, quiet: nullcontext(None))
    with progress(source_name(scene), share_one and not world.leads) as on_tile:
        if share_one:
            from .shared_scene import predict_scene_shared  # torch.distributed

            result = predict_scene_shared(predictor, scene, target, world, on_tile=on_tile)
        else:
            result = predictor.predict_scene(scene, target, on_tile=on_tile)
    if result is None:  # another rank writes the shared scene
        return
    if after:
        after(result)
    summary.scenes.append(result.to_dict())
