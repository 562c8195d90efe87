"""s2s2net: rivers and lakes from Sentinel-2 at 2 m.

    >>> import s2s2net_cli as s2n
    >>> result = s2n.predict("scene.tif", "water.tif", offset=-1000)

The commands as functions (``predict``, ``predict_scenes``, ``evaluate``, ``rivers``,
``occurrence``, ``chip``, ``train``, ``calibrate``, ``gate``, ``synth``, ``load_model``), the option
bundles (``ModelOptions``, ``SceneOptions``) and what errors and warnings carry (``S2S2NetError``, ``S2S2NetWarning``,
``Finding``, ``RULES``). Each is imported when first used, so that ``import s2s2net_cli`` (and
every command's start) stays light.
"""

import importlib

__version__ = "0.1.0"

_EXPORTS = {
    "predict": "api", "predict_scenes": "api", "evaluate": "api", "rivers": "api", "occurrence": "api",
    "chip": "api", "train": "api", "calibrate": "api", "gate": "api", "synth": "api", "load_model": "api",
    "ModelOptions": "inference.options", "PredictOptions": "inference.options", "SceneOptions": "sources.options",
    "S2S2NetError": "errors", "InputError": "errors", "UsageError": "errors", "OutputExistsError": "errors",
    "S2S2NetWarning": "rulebook", "Finding": "rulebook", "RULES": "rulebook",
}
__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(__all__)
