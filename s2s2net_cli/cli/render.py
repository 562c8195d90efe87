"""Rich output on stderr: progress bars and tables. Only the CLI layer imports this."""

from __future__ import annotations

import contextlib
import time

from rich.console import Console
from rich.table import Table
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

stderr = Console(stderr=True)


@contextlib.contextmanager
def progress_bar(description: str, quiet: bool = False, km2_per_step: float | None = None):
    """Yield an ``on_step(done, total)`` callback that drives a progress bar on stderr.

    The bar appears at the first step, so input checks that fail first print only their error.
    With ``km2_per_step`` it also shows the area covered per second.
    """
    if quiet:
        yield None
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


def summary_table(title: str, columns: list[str], rows: list[list[str]], highlight: dict | None = None) -> None:
    """A rich table on stderr. ``highlight`` maps (row, column) to a style."""
    table = Table(title=title)
    for c in columns:
        table.add_column(c, justify="left" if c == columns[0] else "right")
    for i, row in enumerate(rows):
        cells = [f"[{highlight[(i, j)]}]{v}[/]" if highlight and (i, j) in highlight else v for j, v in enumerate(row)]
        table.add_row(*cells)
    stderr.print(table)
