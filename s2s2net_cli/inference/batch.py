"""Predicting a list of scenes: where each output goes, and running them in one process or
shared among the ranks of a launcher.

Under a launcher (deepspeed --module, torchrun: RANK and WORLD_SIZE set) several scenes are
dealt out among the ranks, one scene has its rows of tiles shared (``shared_scene``), and
rank 0 gathers every rank's results into one summary; the other ranks get None.
"""

from __future__ import annotations

from contextlib import nullcontext
from datetime import timedelta
from pathlib import Path
from typing import Callable

from ..errors import S2S2NetError, UsageError, describe
from ..formats import source_name, source_stem
from ..world import World
from .predictor import Predictor, SceneResult
from .shared_scene import gather_on_rank0, predict_scene_shared

# one rank may wait for another's share of a whole scene
PROCESS_GROUP_TIMEOUT = timedelta(hours=12)


def output_targets(scenes: list, output) -> list[tuple]:
    """(scene, output path) for each scene: ``output`` itself for one scene; for several,
    ``output`` is a folder and each scene's mask is ``<stem>_water.tif`` in it (UsageError when
    ``output`` is a file or two scenes would share a name)."""
    output = Path(output)
    if len(scenes) == 1:
        return [(scenes[0], output)]
    if output.exists() and not output.is_dir():
        raise UsageError(describe(output, "is a file; with several scenes -o names a folder"))
    names = [f"{source_stem(s)}_water.tif" for s in scenes]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        same = [s for s, n in zip(scenes, names) if n == twice[0]]
        raise UsageError(f"{same[0]} and {same[1]} would both be written to {output / twice[0]}; "
                         "predict them into separate folders")
    return [(s, output / n) for s, n in zip(scenes, names)]


def predict_scenes(predictor: Predictor, targets: list[tuple], world: World = World(), progress: Callable | None = None,
                   after: Callable[[SceneResult], None] | None = None,
                   on_failure: Callable[[S2S2NetError], None] | None = None) -> tuple[list[dict], list[dict]] | None:
    """Predict each (scene, output) of ``targets``; (results, failures) as dicts on rank 0.

    ``progress(name, quiet)`` gives a context manager yielding an ``on_tile(done, total)``
    callback (or None); ``after(result)`` runs for each scene written (vectors, say). With one
    target its error is raised; with several, a failed scene goes to ``on_failure`` and the
    failures list and the others go on.
    """
    progress = progress or (lambda name, quiet: nullcontext(None))
    if world.is_shared:
        world.join(PROCESS_GROUP_TIMEOUT)
    share_one = world.is_shared and len(targets) == 1  # one scene: its rows of tiles are shared
    if len(targets) > 1:  # the folder of several outputs
        for folder in {Path(target).parent for _, target in targets}:
            folder.mkdir(parents=True, exist_ok=True)
    results, failures = [], []
    for scene, target in (targets if share_one else targets[world.rank::world.size]):
        try:
            with progress(source_name(scene), share_one and not world.leads) as on_tile:
                if share_one:
                    result = predict_scene_shared(predictor, scene, target, world, on_tile=on_tile)
                else:
                    result = predictor.predict_scene(scene, target, on_tile=on_tile)
            if result is None:  # another rank writes the shared scene
                continue
            if after:
                after(result)
            results.append(result.to_dict())
        except S2S2NetError as exc:
            if len(targets) == 1:
                raise
            if on_failure:
                on_failure(exc)
            failures.append({"scene": str(scene), "error": str(exc)})
    if world.is_shared:  # one summary, from rank 0, of every rank's scenes
        results, failures = gather_on_rank0(results, failures, world)
        World.leave()
        if not world.leads:
            return None
    return results, failures
