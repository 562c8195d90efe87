"""Predicting a list of scenes: in one process, or shared among the ranks of a launcher.

Under a launcher (deepspeed --module, torchrun: RANK and WORLD_SIZE set) several scenes are
dealt out among the ranks, one scene has its rows of tiles shared (``shared_scene``), and
rank 0 gathers every rank's results into one summary; the other ranks get None.
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Callable

from .bands import source_name
from .errors import S2S2NetError
from .predict import Predictor, SceneResult
from .shared_scene import close_process_group, gather_on_rank0, launcher_world, predict_scene_shared, process_group


def predict_scenes(predictor: Predictor, targets: list[tuple], progress: Callable | None = None,
                   after: Callable[[SceneResult], None] | None = None,
                   on_failure: Callable[[S2S2NetError], None] | None = None) -> tuple[list[dict], list[dict]] | None:
    """Predict each (scene, output) of ``targets``; (results, failures) as dicts on rank 0.

    ``progress(name, quiet)`` gives a context manager yielding an ``on_tile(done, total)``
    callback (or None); ``after(result)`` runs for each scene written (vectors, say). With one
    target its error is raised; with several, a failed scene goes to ``on_failure`` and the
    failures list and the others go on.
    """
    progress = progress or (lambda name, quiet: nullcontext(None))
    rank, world = launcher_world()
    if world > 1:
        process_group()
    share_one = world > 1 and len(targets) == 1  # one scene: its rows of tiles are shared
    results, failures = [], []
    for scene, target in (targets if share_one else targets[rank::world]):
        try:
            with progress(source_name(scene), share_one and rank != 0) as on_tile:
                if share_one:
                    result = predict_scene_shared(predictor, scene, target, on_tile=on_tile)
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
    if world > 1:  # one summary, from rank 0, of every rank's scenes
        results, failures = gather_on_rank0(results, failures)
        close_process_group()
        if rank != 0:
            return None
    return results, failures
