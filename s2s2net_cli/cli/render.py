"""Rich output on stderr: progress bars and tables. Only the CLI layer imports this."""

from __future__ import annotations

import contextlib
import logging
import time
import traceback

import click
from rich.console import Console
from rich.measure import Measurement
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from ..rulebook import with_code

stderr = Console(stderr=True)
log = logging.getLogger("s2s2net")


def log_findings(findings) -> None:
    """Each rulebook finding (a Finding, or its JSON form) once on stderr, with its code."""
    said = dict.fromkeys((f["message"], f["code"]) if isinstance(f, dict) else (str(f), f.code) for f in findings)
    for message, code in said:
        log.warning(f"{message} [{code}]")


PLAIN_LINE_SECONDS = 10.0  # a log file gets a progress line at most this often (and the last)


@contextlib.contextmanager
def progress_bar(description: str, quiet: bool = False, km2_per_step: float | None = None, every_step: bool = False):
    """Yield an ``on_step(done, total)`` callback that drives a progress bar on stderr, or, when
    stderr is not a terminal (a log file, a batch job), writes plain lines at a steady pace
    (every step with ``every_step``).

    The bar appears at the first step, so input checks that fail first print only their error.
    With ``km2_per_step`` it also shows the area covered per second.
    """
    if quiet:
        yield None
        return
    if not stderr.is_terminal:
        yield _plain_lines(description, km2_per_step, 0.0 if every_step else PLAIN_LINE_SECONDS)
        return
    columns = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), TimeRemainingColumn()]
    if km2_per_step:
        columns.append(TextColumn("{task.fields[rate]}"))
    progress = Progress(*columns, console=stderr, transient=False)
    task = None
    started = time.monotonic()

    def on_step(done: int, total: int) -> None:
        nonlocal task
        if task is None:
            progress.start()
            task = progress.add_task(description, total=total, rate="")
        elapsed = time.monotonic() - started
        rate = f"{done * km2_per_step / elapsed:.2f} km2/s" if km2_per_step and elapsed > 0 else ""
        progress.update(task, completed=done, total=total, rate=rate)

    try:
        yield on_step
    finally:
        if task is not None:
            progress.stop()


def _plain_lines(description: str, km2_per_step: float | None, interval: float):
    """An ``on_step(done, total)`` that writes a line to stderr at most every ``interval`` seconds, and at the end."""
    started = last = time.monotonic()

    def on_step(done: int, total: int) -> None:
        nonlocal last
        now = time.monotonic()
        if done < total and now - last < interval:
            return
        last, elapsed = now, now - started
        rate = f", {done * km2_per_step / elapsed:.2f} km2/s" if km2_per_step and elapsed > 0 else ""
        click.echo(f"{description}: {done}/{total} ({done / total:.0%}), {elapsed:.0f} s{rate}", err=True)

    return on_step


def counted(n: int, noun: str) -> str:
    """``n`` and ``noun``, plural unless one: "1 date", "3 dates"."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def summary_table(title: str, columns: list[str], rows: list[list[str]], highlight: dict | None = None) -> None:
    """A rich table on stderr. ``highlight`` maps (row, column) to a style.

    The first column's names are never cut: a terminal too narrow for the table folds them onto
    more lines, and a log or a pipe (no width of its own: rich would take 80 columns and print
    "default.safet…") gets the table at its natural width."""
    table = Table(title=title)
    for c in columns:
        first = c == columns[0]
        table.add_column(c, justify="left" if first else "right", overflow="fold" if first else "ellipsis")
    for i, row in enumerate(rows):
        cells = [f"[{highlight[(i, j)]}]{v}[/]" if highlight and (i, j) in highlight else v for j, v in enumerate(row)]
        table.add_row(*cells)
    if stderr.is_terminal:
        stderr.print(table)
        return
    natural = Measurement.get(stderr, stderr.options.update_width(UNBOUNDED_WIDTH), table).maximum
    Console(stderr=True, width=max(natural, stderr.width)).print(table)


UNBOUNDED_WIDTH = 10_000  # columns a table may take where stderr is not a terminal


def report_error(ctx: click.Context, exc: BaseException) -> None:
    """One line on stderr for an error the command goes on after (a scene of several), with
    the traceback before it under --debug."""
    if ctx.obj and ctx.obj.get("debug"):
        traceback.print_exception(exc)
    click.echo(f"Error: {with_code(exc)}", err=True)
