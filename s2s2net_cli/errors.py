"""Errors the core raises for bad input; the CLI turns them into one line and an exit status."""

from contextlib import contextmanager
from contextvars import ContextVar

# Whose terms a message names options in: "python" (``overwrite=True``) for the library, "cli"
# (``--overwrite``) while a command runs (``said_as``).
INTERFACE: ContextVar[str] = ContextVar("s2s2net_interface", default="python")


@contextmanager
def said_as(interface: str):
    """Within the block, errors of the rulebook name options as ``interface`` does."""
    token = INTERFACE.set(interface)
    try:
        yield
    finally:
        INTERFACE.reset(token)


class S2S2NetError(Exception):
    """A failure the user can act on. The message names the file and the problem; raised by a
    rule of the rulebook (``.finding``), it names options in the terms of who reads it: Python's
    keywords in the library, flags while a command runs."""

    exit_code = 1

    def __str__(self) -> str:
        found = getattr(self, "finding", None)
        return found.message(INTERFACE.get()) if found is not None else super().__str__()


class InputError(S2S2NetError):
    """An input file (scene, mask, manifest, weights, chips folder) that cannot be used."""


class UsageError(S2S2NetError):
    """Options that cannot work together (exit status 2, as Click's own usage errors)."""

    exit_code = 2


class OutputExistsError(S2S2NetError):
    """An output that already exists and may not be replaced without --overwrite."""


def describe(path, problem: str) -> str:
    """The one-line form every error takes: ``PATH: problem``."""
    return f"{path}: {problem}"


def first_line(exc: BaseException) -> str:
    """The first non-empty line of an exception's message (GDAL's run to several), or its type's
    name; for rasterio's "Read failed. See previous exception for details." GDAL's own, which
    names the file that failed (a damaged band file of a product or a folder)."""
    text = str(exc).strip()
    if "See previous exception for details" in text and exc.__cause__ is not None:
        return first_line(exc.__cause__)
    return text.splitlines()[0] if text else type(exc).__name__
