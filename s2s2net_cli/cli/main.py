"""The ``s2s2net`` command group: logging, --debug, the launcher's --local_rank, error lines."""

from __future__ import annotations

import errno
import importlib
import json
import logging
import os
import signal
import sys
import warnings

import click
import rasterio
from rasterio.errors import NotGeoreferencedWarning, RasterioError, RasterioIOError

from .. import __version__
from ..errors import S2S2NetError, first_line, said_as
from ..rulebook import RULES, S2S2NetWarning, code_of, finding, refuse, with_code
from ..world import World
from .options import NoSuchCommand, SuggestingGroup, usage_error

# help shown for no arguments: an error from Click 8.2 on, and none before
NO_ARGS_IS_HELP = getattr(click.exceptions, "NoArgsIsHelpError", ())

# GDAL's block cache defaults to 5 % of RAM and keeps dirty output blocks in it: on a full
# Sentinel-2 tile that is gigabytes that predict and chip, which stream row by row, never use
# again. A user's own GDAL_CACHEMAX wins.
GDAL_CACHE_MB = 256
# predict writes each block once and rereads only a tile row's context, rivers reads each window
# once: more cache is only resident memory (a 2048 px scene held 150 MB more than a 512 px one
# at 256)
GDAL_CACHE_MB_STREAMING = 64
STREAMING = ("predict", "rivers")


GLOBAL_FLAGS = ("-q", "--quiet", "-v", "-vv", "-vvv", "--verbose", "--debug", "--version")
# Each command's module is imported when the command runs (as Click's lazy-loading pattern
# does), so that a command that needs no torch (rivers, occurrence --from-masks, synth, chip)
# starts without it: importing torch alone takes seconds and hundreds of MB.
COMMANDS = {
    "checks": ("checks", "checks"), "chip": ("chip", "chip"), "compare": ("evaluate", "compare"), "evaluate": ("evaluate", "evaluate"),
    "occurrence": ("occurrence", "occurrence"), "predict": ("predict", "predict"), "rivers": ("rivers", "rivers"),
    "synth": ("synth", "synth"), "train": ("train", "train"), "weights": ("weights", "weights"),
}


class S2S2NetGroup(SuggestingGroup):
    """Turns the core's errors into one line on stderr (exit 1), tracebacks only with --debug;
    takes -q, -v, --debug and --version anywhere on the line, before or after the command's
    name; a misspelt command's name gets the commands it may have meant."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str):
        if name not in COMMANDS:
            return None
        module, attribute = COMMANDS[name]
        return getattr(importlib.import_module(f"{__package__}.{module}"), attribute)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        command = next((i for i, a in enumerate(args) if a in COMMANDS), None)
        if command is not None:
            end = command + args[command:].index("--") if "--" in args[command:] else len(args)
            moved = [a for a in args[command:end] if a in GLOBAL_FLAGS]
            args = moved + args[:command] + [a for a in args[command:end] if a not in GLOBAL_FLAGS] + args[end:]
            ctx.meta["s2s2net.json"] = "--json" in args[command:end]
        try:
            return super().parse_args(ctx, args)
        except click.ClickException as exc:  # the group's own options (s2s2net --bogus)
            raise _coded(exc) from None

    def invoke(self, ctx: click.Context):
        # the rulebook's errors name flags, not keywords; its findings are log lines here (each
        # command logs its own), not the library's Python warnings of them said a second time;
        # nor rasterio's of a raster without georeference, which a rule refuses in one line
        with said_as("cli"), warnings.catch_warnings():
            warnings.simplefilter("ignore", S2S2NetWarning)
            warnings.simplefilter("ignore", NotGeoreferencedWarning)
            return self._invoke(ctx)

    def _invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except S2S2NetError as exc:
            if ctx.obj and ctx.obj.get("debug"):
                raise
            _json_failure(ctx, str(exc), exc.exit_code, code_of(exc))
            if getattr(exc, "warnings", None):  # what may say why, before the line that stops it
                from .render import log_findings

                log_findings(exc.warnings)
            click.echo(f"Error: {with_code(exc)}", err=True)
            ctx.exit(exc.exit_code)
        except (RasterioError, RasterioIOError) as exc:  # GDAL's messages name the file (IO: an OSError before 1.4)
            if ctx.obj and ctx.obj.get("debug"):
                raise
            _json_failure(ctx, first_line(exc), 1)
            click.echo(f"Error: {first_line(exc)}", err=True)
            ctx.exit(1)
        except OSError as exc:  # a write no atomic output caught (a log, metrics.jsonl) on a full disk
            if exc.errno != errno.ENOSPC or (ctx.obj and ctx.obj.get("debug")):
                raise
            failed = refuse("S2N-OUTPUT-WRITE-FAILED", exc.filename or "output", error=os.strerror(errno.ENOSPC))
            _json_failure(ctx, str(failed), failed.exit_code, code_of(failed))
            click.echo(f"Error: {with_code(failed)}", err=True)
            ctx.exit(failed.exit_code)
        except click.ClickException as exc:  # a usage error: Click says it on stderr, exit 2
            exc = _coded(exc)
            _json_failure(ctx, exc.format_message(), exc.exit_code, code_of(exc))
            raise exc from None
        except KeyboardInterrupt as exc:
            if ctx.obj and ctx.obj.get("debug"):
                raise
            click.echo("Aborted: interrupted; no output was left half-written.", err=True)
            ctx.exit(128 + getattr(exc, "signum", signal.SIGINT))


def _coded(exc: click.ClickException) -> click.ClickException:
    """One of Click's own parse errors with its rule's code, as the rulebook's usage errors
    carry theirs (Click's words kept); a usage error with a code, or help shown for no
    arguments, as it is."""
    if code_of(exc) is not None or not isinstance(exc, click.UsageError) \
            or isinstance(exc, NO_ARGS_IS_HELP):
        return exc
    code = next((c for kind, c in PARSE_RULES if isinstance(exc, kind)), "S2N-PARSE-USAGE")
    (said,) = RULES[code].values  # the rule's one value: Click's message
    return usage_error(finding(code, **{said: exc.format_message()}), exc.ctx)


# Click's own parse errors by kind, and their rules (any other usage error: S2N-PARSE-USAGE)
PARSE_RULES = ((click.MissingParameter, "S2N-PARSE-MISSING"), (click.NoSuchOption, "S2N-PARSE-NO-SUCH-OPTION"),
               (NoSuchCommand, "S2N-PARSE-NO-SUCH-COMMAND"),
               (click.BadParameter, "S2N-PARSE-BAD-VALUE"))


def _json_failure(ctx: click.Context, message: str, exit_code: int, code: str | None = None) -> None:
    """With --json, a command that fails still prints one JSON document on stdout: its failure,
    as predict's batch document lists failed scenes."""
    if ctx.meta.get("s2s2net.json"):
        click.echo(json.dumps({"failures": [{"error": message, "code": code, "exit_code": exit_code}]}, indent=2))


class _StderrHandler(logging.StreamHandler):
    """Log records to whatever sys.stderr is when they are emitted (the command may run more
    than once in one process, as in tests, each time with its own stderr)."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value):
        pass


class Terminated(KeyboardInterrupt):
    """SIGTERM, which unwinds like Ctrl-C (temporary files are removed) and exits 143."""

    signum = signal.SIGTERM


def _terminate(signum, frame):
    raise Terminated(f"signal {signum}")


@click.group(cls=S2S2NetGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="s2s2net")
@click.option("-v", "--verbose", count=True, help="More log output (repeat for debug messages).")
@click.option("-q", "--quiet", is_flag=True, help="Only warnings and errors.")
@click.option("--debug", is_flag=True, help="Show full tracebacks on errors.")
@click.option("--local_rank", "--local-rank", "local_rank", type=int, default=None, hidden=True,
              help="Set by the DeepSpeed launcher.")
@click.pass_context
def cli(ctx: click.Context, verbose: int, quiet: bool, debug: bool, local_rank: int | None) -> None:
    """Rivers and lakes from Sentinel-2 at 2 m.

    \b
    Examples:
      s2s2net predict scene.tif -o water.tif
      s2s2net synth demo/ --count 4
      deepspeed --num_gpus 8 --module s2s2net_cli train chips/ -o run/
    """
    level = logging.WARNING if quiet or not verbose else (logging.DEBUG if verbose > 1 else logging.INFO)
    root = logging.getLogger()
    if not any(isinstance(h, _StderrHandler) for h in root.handlers):
        handler = _StderrHandler()
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        root.addHandler(handler)
    root.setLevel(level)
    for noisy in ("rasterio", "fiona", "pyogrio", "DeepSpeed", "deepspeed", "torch.distributed"):
        # GDAL's own warnings only with -v: the one-line error says what matters
        logging.getLogger(noisy).setLevel(logging.WARNING if verbose else logging.ERROR)
    ctx.ensure_object(dict)
    ctx.obj.update(debug=debug, quiet=quiet, verbose=verbose, world=World.from_environment(local_rank))
    if "GDAL_CACHEMAX" not in os.environ:  # GDAL's block cache, for this command only
        cache_mb = GDAL_CACHE_MB_STREAMING if ctx.invoked_subcommand in STREAMING else GDAL_CACHE_MB
        ctx.with_resource(rasterio.Env(GDAL_CACHEMAX=cache_mb * 2 ** 20))
    signal.signal(signal.SIGTERM, _terminate)
