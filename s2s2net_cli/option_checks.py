"""The checks every options bundle makes of its own fields (ranges, options that exclude each
other), as the rulebook words them: the command line's types refuse the same values first;
the library's calls meet them here."""

from __future__ import annotations

from .rulebook import FLAG_NAMES, option, refuse


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
