"""The checks every options bundle makes of its own fields (kinds, ranges, options that exclude
each other), as the rulebook words them: the command line's types refuse the same values
first; the library's calls meet them here."""

from __future__ import annotations

import dataclasses
import numbers
import os
import types
import typing

from .rulebook import FLAG_NAMES, Phrase, option, refuse

# what a field annotated so takes, and how a message says it
KINDS = {
    int: ("a whole number", lambda v: isinstance(v, numbers.Integral) and not _is_bool(v)),
    float: ("a number", lambda v: isinstance(v, numbers.Real) and not _is_bool(v)),
    bool: ("True or False", lambda v: _is_bool(v)),
    str: ("a string or path", lambda v: isinstance(v, (str, os.PathLike))),
}


MAX_SEED = 2 ** 32 - 1  # the largest seed every generator a run seeds takes (numpy's legacy one)
SEED_BOUNDS = {"least": {"seed": 0}, "most": {"seed": MAX_SEED}}


def _is_bool(value) -> bool:
    return isinstance(value, bool) or type(value).__name__ == "bool_"  # numpy's too


def precision_text(value):
    """A precision as the choices spell it: 32 and 16, as Python callers write them, are "32" and "16"."""
    return str(value) if isinstance(value, numbers.Integral) and not _is_bool(value) else value


def check_types(bundle) -> None:
    """Refuse a field of the options dataclass ``bundle`` whose value is not of the kind its
    annotation says (a whole number, a number, True or False, a string or path; or None where
    it may be), as ``S2N-OPTION-TYPE``: a string where a number belongs would fail deep inside,
    and a bool field's "no" would run as True. Fields of other kinds are their own checks'.
    A numpy number is taken, as the Python number it holds."""
    hints = typing.get_type_hints(type(bundle))
    for field in dataclasses.fields(bundle):  # numpy's numbers kept as Python's, so results write as JSON
        value = getattr(bundle, field.name)
        if type(value).__module__ == "numpy" and getattr(value, "size", 1) == 1 and _scalar_kinds(hints.get(field.name)):
            object.__setattr__(bundle, field.name, value.item())
    check_kinds({f.name: getattr(bundle, f.name) for f in dataclasses.fields(bundle)}, hints)


def check_kinds(values: dict, hints: dict) -> None:
    """check_types of ``values`` by name against the annotations ``hints`` (a dataclass's, or a
    function's own: ``typing.get_type_hints(evaluate)`` for its loose keywords)."""
    for name, value in values.items():
        kinds = _scalar_kinds(hints.get(name))
        if kinds is None or (value is None and type(None) in kinds):
            continue
        allowed = [KINDS[k] for k in kinds if k in KINDS]
        if not any(accepts(value) for _, accepts in allowed):
            raise refuse("S2N-OPTION-TYPE", None, given=option(FLAG_NAMES.get(name, name), shown(value)),
                         kind=" or ".join(said for said, _ in allowed))


def shown(value) -> str:
    """``value`` as a message shows it: its repr where that is short, else its type
    (``<geopandas.GeoDataFrame>``), not a table's or an array's many lines."""
    text = repr(value)
    if len(text) <= 60 and "\n" not in text:
        return text
    kind = type(value)
    root = kind.__module__.split(".")[0]
    return f"<{kind.__qualname__ if root == 'builtins' else f'{root}.{kind.__qualname__}'}>"


def _scalar_kinds(hint) -> tuple | None:
    """The kinds a scalar annotation allows (``int``, ``float | None``...); None for others."""
    args = hint.__args__ if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union else (hint,)
    return args if all(a in KINDS or a is type(None) for a in args) else None


def check_bounds(bundle, least: dict | None = None, above: dict | None = None, most: dict | None = None) -> None:
    """Refuse a field of the options ``bundle`` out of its range, as ``S2N-OPTION-RANGE``: under
    its ``least``, not above its ``above``, over its ``most`` value (by field name; unset, None,
    passes). The command line's types refuse the same first; the library meets them here."""
    for bounds, out, said in ((least or {}, lambda v, b: not v >= b, "under {}"),
                              (above or {}, lambda v, b: not v > b, "not above {}"),
                              (most or {}, lambda v, b: not v <= b, "over {}")):
        for name, bound in bounds.items():
            value = getattr(bundle, name)
            if value is not None and out(value, bound):
                raise refuse("S2N-OPTION-RANGE", None, given=option(FLAG_NAMES.get(name, name), value),
                             bound=said.format(bound))


def check_exclusive(bundle, first: str, second: str) -> None:
    """Refuse two fields of ``bundle`` given together that exclude each other."""
    if getattr(bundle, first) and getattr(bundle, second):
        raise refuse("S2N-OPTIONS-EXCLUSIVE", None, first=option(FLAG_NAMES.get(first, first)),
                     second=option(FLAG_NAMES.get(second, second)))


def fields_set(bundle, names: tuple[str, ...] | None = None) -> list[str]:
    """The fields of ``bundle`` (of ``names``, in the bundle's order) whose values are not those
    of its class made without arguments (as its checks finish them): the options a command or a
    call gave. Not for a bundle's own checks (it would make itself again)."""
    plain = type(bundle)()
    return [f.name for f in dataclasses.fields(bundle)
            if (names is None or f.name in names) and getattr(bundle, f.name) != getattr(plain, f.name)]


def options_said(bundle, names: list[str]) -> Phrase:
    """The fields ``names`` of ``bundle`` with their values, as each interface gives them:
    "--threshold 0.3, --flips, --bands 3,2,1,4,5,6" or "threshold=0.3, flips=True, ..."."""
    return Phrase(", ".join(option(FLAG_NAMES.get(n, n), _as_given(getattr(bundle, n))).template for n in names))


def _as_given(value):
    """A field's value as an option takes it: -1000 (not -1000.0), 3,2,1,4,5,6 (a tuple)."""
    if isinstance(value, tuple):
        return ",".join(str(_as_given(v)) for v in value)
    return f"{value:g}" if isinstance(value, float) else value
