"""Options that several commands share, so each is defined once; ``scene_options`` hands a
command one finished SceneOptions, as rasterio's rio/options.py hands finished values."""

from __future__ import annotations

import difflib
import functools
import os
from dataclasses import fields
from pathlib import Path

import click

from ..bands import band_indexes
from ..errors import S2S2NetError
from ..formats import WEIGHTS_FILE, OutputKind
from ..inference.options import (
    DEFAULT_OVERLAP,
    DEFAULT_TILE_SIZE,
    MIN_TILE_SIZE,
    PRECISIONS,
    RUN_PRECISIONS,
    ModelOptions,
    is_device,
)
from ..io import check_suffix
from ..manifest import pairs_from_options
from ..option_checks import MAX_SEED
from ..rulebook import finding
from ..sources.aoi import check_bbox
from ..sources.options import SceneOptions

overwrite_option = click.option("--overwrite", is_flag=True, help="Replace existing outputs.")
json_option = click.option("--json", "as_json", is_flag=True, help="Print a machine-readable JSON summary on stdout.")


def parse_bands(ctx, param, value):
    """--bands 1,2,3,4,5,6: six distinct 1-based band indexes."""
    if value is None:
        return None
    try:
        return band_indexes(value)
    except S2S2NetError as exc:  # said as Click says a bad value
        raise bad_parameter(exc.finding, ctx, param) from None


bands_option = click.option("--bands", callback=parse_bands, metavar="I,I,I,I,I,I",
                            help="1-based band indexes of B02,B03,B04,B08,B11,B12 in the scene (default 1..6).")


def bad_parameter(found, ctx=None, param=None, hint: str | None = None) -> click.BadParameter:
    """Click's usage error (exit 2, the option named) for a rulebook finding, with its code."""
    error = click.BadParameter(coded(found), ctx, param, param_hint=f"'{hint}'" if hint else None)
    error.finding = found  # its code for --json (rulebook.code_of), as the core's errors carry theirs
    return error


def usage_error(found, ctx=None) -> click.UsageError:
    """Click's usage error (exit 2) for a rulebook finding, with its code, and carrying it."""
    error = click.UsageError(coded(found), ctx)
    error.finding = found
    return error


def coded(found) -> str:
    """A finding's problem as Click says it, with its code."""
    return f"{found.problem()} [{found.code}]"


class NoSuchCommand(click.UsageError):
    """A command a group does not have, with those it may have meant, as Click words it (its own
    class of this error is Click 8.4's; older ones fail with a plain usage error)."""

    def __init__(self, name: str, possibilities: list[str], ctx: click.Context | None = None):
        near = sorted(difflib.get_close_matches(name, possibilities))
        said = ", ".join(map(repr, near))
        meant = "" if not near else f" Did you mean {said}?" if len(near) == 1 else f" (Did you mean one of: {said}?)"
        super().__init__(f"No such command {name!r}.{meant}", ctx)


class SuggestingGroup(click.Group):
    """A group whose misspelt command's name gets the commands it may have meant, drawn from
    those it lists (a group that loads its commands lazily holds none for Click to draw from),
    on every Click the package takes."""

    def resolve_command(self, ctx: click.Context, args: list[str]):
        name = args[0] if args else ""
        if name not in self.list_commands(ctx) and not name.startswith("-") and not ctx.resilient_parsing:
            raise NoSuchCommand(name, self.list_commands(ctx), ctx)
        return super().resolve_command(ctx, args)


class HintedCommand(click.Command):
    """A command whose usage errors say what a newcomer most likely meant: a scene and its mask
    given as arguments where the command takes ``--pair``, or an output given as the last
    argument where it takes ``-o``. Click's own message stands where no such reading fits."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, list(args))
        except click.UsageError as exc:
            if ctx.resilient_parsing:
                raise
            found = self._meant(ctx, args, exc)
            if found is None:
                raise
            raise usage_error(found, ctx) from None

    def _meant(self, ctx: click.Context, args: list[str], exc: click.UsageError):
        """The finding of what the command line most likely meant, or None."""
        try:  # parsed again without Click's checks: the arguments as the command reads them
            parsed = self.make_context(self.name, list(args), parent=ctx.parent, resilient_parsing=True)
        except click.ClickException:
            return None
        extra = [a for a in parsed.args if not a.startswith("-")]
        takes = {p.name for p in self.params}
        missing_output = isinstance(exc, click.MissingParameter) and "-o" in getattr(exc.param, "opts", ())
        if "pairs" in takes and len(extra) >= 2:
            pairs = " (here " + " ".join(f"--pair {a} {b}" for a, b in zip(extra[::2], extra[1::2])) + ")" \
                if len(extra) % 2 == 0 else ""
            return finding("S2N-PAIR-AS-ARGUMENTS", given=" ".join(extra), pairs=pairs)
        if not missing_output:
            return None
        if len(extra) == 1:
            return finding("S2N-OUTPUT-AS-ARGUMENT", given=extra[0])
        several = [p for p in self.params if isinstance(p, click.Argument) and p.nargs == -1]
        values = list(parsed.params.get(several[0].name) or ()) if several else []
        if not extra and len(values) >= 2 and not os.path.exists(values[-1]):
            last = os.path.normpath(values[-1])  # as typed: a Path drops a folder's trailing /
            given = next((a for a in reversed(args) if os.path.normpath(a) == last), str(values[-1]))
            return finding("S2N-OUTPUT-AS-ARGUMENT", given=given)
        return None


def weights_src_dst(command):
    """SRC, the weights read, and DST, the weights written: an argument, or -o/--output as the
    other commands name what they write (rio's commands take both)."""
    command = click.option("-o", "--output", type=OutputFile(WEIGHTS_FILE), default=None,
                           help="The weights file to write, instead of DST.")(command)
    command = click.argument("dst", type=OutputFile(WEIGHTS_FILE), required=False)(command)
    return click.argument("src", type=click.Path(path_type=Path))(command)


def weights_dst(dst, output):
    """The weights file to write, given as DST or as --output (one of them)."""
    ctx = click.get_current_context()
    if dst is not None and output is not None:
        raise bad_parameter(exclusive("DST", "--output"), ctx, hint="--output")
    if dst is None and output is None:
        raise usage_error(finding("S2N-WEIGHTS-DST-MISSING"), ctx)
    return dst if dst is not None else output


def exclusive(first: str, second: str):
    """The finding of two options given together that exclude each other."""
    return finding("S2N-OPTIONS-EXCLUSIVE", first=first, second=second)


def parse_name_values(ctx, param, values) -> dict:
    """Repeated NAME=VALUE options (--co, --set) as a dict."""
    out = {}
    for item in values or ():
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise bad_parameter(finding("S2N-NAME-VALUE", item=item), ctx, param)
        out[name.strip()] = value.strip()
    return out


class OutputFile(click.ParamType):
    """An output file's path (a ``Path``), refused as the core refuses it (check_suffix, said as
    Click says a bad value) where named for another format than its ``kind``, or as a folder: a
    name ending in / (which a ``Path`` would lose, writing a file called so) or an existing one."""

    name = "file"

    def __init__(self, kind: OutputKind):
        self.kind = kind

    def convert(self, value, param, ctx):
        if isinstance(value, Path):  # converted already (a default, or invoked from Python)
            return value
        try:
            check_suffix(value, self.kind)
        except S2S2NetError as exc:
            raise bad_parameter(exc.finding, ctx, param) from None
        return Path(value)

    def shell_complete(self, ctx, param, incomplete):
        return [click.shell_completion.CompletionItem(incomplete, type="file")]


creation_options = click.option("--co", "creation_options", multiple=True, callback=parse_name_values,
                                metavar="NAME=VALUE", help="GeoTIFF creation option (repeatable), as in rio.")


def _check_device(ctx, param, value):
    if not is_device(value):  # said by Click, naming the option, before the bundle is made
        raise bad_parameter(finding("S2N-DEVICE-UNKNOWN", value=value), ctx, param)
    return value


_MODEL = ModelOptions()  # the defaults, as the options show them
device_option = click.option("--device", default=_MODEL.device, show_default=True, callback=_check_device,
                             help="auto, cpu, cuda or cuda:N.")
flips_option = click.option("--flips", is_flag=True,
                            help="Test-time augmentation: average each tile's water probability over its eight flips "
                                 "and quarter turns (8x the work).")
tile_size_option = click.option("--tile-size", type=click.IntRange(MIN_TILE_SIZE), default=_MODEL.tile_size,
                                help=f"Tile side in 10 m pixels (default: planned for each scene, as few tiles as "
                                     f"{DEFAULT_TILE_SIZE} px ones, each as small as covers it); no larger than the "
                                     "scene. Memory grows with it (on a CPU about 1.3 GB at 512, 3 GB at 2048, 7.3 GB "
                                     "at 4096); smaller tiles give the network less context, and score lower.")
overlap_option = click.option("--overlap", type=click.IntRange(0), default=None,
                              help=f"Context read on each side of a tile (10 m pixels; default {DEFAULT_OVERLAP}, at "
                                   "most the tile size).")
precision_option = click.option("--precision", type=click.Choice(RUN_PRECISIONS), default=_MODEL.precision,
                                show_default=True, help="auto: bf16 on GPUs that have it (else 16) and on CPUs that do bf16 "
                                                        "natively (AVX512_BF16 or AMX); int8 on other x86 CPUs with VNNI "
                                                        "(AVX512_VNNI or AVX_VNNI) for weights with int8 ranges (the "
                                                        "bundled ones); else fp32. int8: the head's "
                                                        "convolutions in 8-bit integers (x86 CPUs).")
train_precision_option = click.option("--precision", type=click.Choice(PRECISIONS), default=_MODEL.precision,
                                      show_default=True, help="auto: bf16 on GPUs that have it (else 16), fp32 on the CPU.")


def seed_option(default: int, help: str):
    """--seed, a whole number every generator a run seeds takes."""
    return click.option("--seed", type=click.IntRange(0, MAX_SEED), default=default, show_default=True, help=help)


batch_size_option = click.option("--batch-size", type=click.IntRange(1), default=None,
                                 help="Tiles per forward pass (default 1 on the CPU, 8 on a GPU).")
threshold_option = click.option("--threshold", type=click.FloatRange(0, 1), default=None,
                                help="Probability at and above which a pixel is water (default: the model's calibrated "
                                     "threshold).")
full_head_option = click.option("--full-head", is_flag=True,
                                help="Run the network's head on every pixel, also where the weights' water gate "
                                     "rules water out (about 1 in a million water pixels there; slower).")
MODEL_OPTIONS = (tile_size_option, overlap_option, batch_size_option, device_option, precision_option, flips_option,
                 threshold_option, full_head_option)


def model_options(command=None, *, several: bool = False):
    """The options of how a model runs (--weights, --tile-size, --overlap, --batch-size, --device,
    --precision, --flips, --threshold, --full-head), handed to ``command`` as one finished ``model:
    ModelOptions``. With ``several``, --weights may be given more than once and comes as
    ``weights`` (a tuple) beside ``model``. A new model option is one decorator here and one
    field of ModelOptions of the same name."""
    if command is None:
        return functools.partial(model_options, several=several)
    names = [f.name for f in fields(ModelOptions) if f.name != "weights"]

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        values = {name: kwargs.pop(name) for name in names}
        weights = kwargs.pop("weights")
        model = ModelOptions(weights=None if several else weights, **values)
        return command(*args, model=model, **({"weights": weights} if several else {}), **kwargs)

    weights_option = click.option(
        "--weights", multiple=several, type=click.Path(),
        help="Weights file, or default for the bundled model" + (" (repeatable)." if several else " (the default)."))
    for option in reversed((weights_option, *MODEL_OPTIONS)):
        wrapper = option(wrapper)
    return wrapper


DEGRADED = "Each scene is degraded N x (block means; B11/B12 then over 2 x 2 coarse cells)"


def degrade_option(what: str):
    """--degrade N (Wald's protocol), with what the command does with the degraded scene."""
    return click.option("--degrade", type=click.IntRange(2, 5), default=None, metavar="N",
                        help=f"Wald's protocol. {DEGRADED}, {what}")


score_degrade_option = degrade_option(
    "mapped back up and scored against its reference on the reference's own grid: the 2 m detail scored on your "
    "own labels (5: a 10 m label tests the network's 5x).")
chip_degrade_option = degrade_option(
    "and cut into chips whose masks are its label as it is: exact truth on the N x grid (5: a 10 m label teaches "
    "the network's 5x); --size and --stride count the degraded pixels.")


pair_option = click.option("--pair", "pairs", nargs=2, multiple=True, type=str, metavar="SCENE MASK",
                           help="A scene (stack, product, STAC item) and its mask: a raster (water 1, land 0) or a "
                                "vector file of water polygons (repeatable).")
manifest_option = click.option("--manifest", "manifests", type=click.Path(dir_okay=False), multiple=True,
                               help="CSV with columns image,mask (optional id, split); paths relative to the file "
                                    "(repeatable).")
nodata_option = click.option("--nodata", type=float, default=None,
                             help="Mask value that means nodata, besides NaN and the file's own nodata value "
                                  "(which it replaces where the file tags land's 0 or water's 1).")


def require_pairs(ctx, pairs, manifests):
    """Pairs from --pair and --manifest (at least one of them)."""
    if not pairs and not manifests:
        raise usage_error(finding("S2N-PAIRS-MISSING"), ctx)
    return pairs_from_options(list(pairs), manifests)


# -- where a scene comes from and which of its pixels count (predict, evaluate, compare, chip) --

scale_option = click.option("--scale", type=click.FloatRange(min=0, min_open=True), default=None,
                            help="Divisor from a stack's values to reflectance (default 10000; 1 for a float stack of "
                                 "reflectance, values 0-2). Products and STAC items take theirs from their metadata.")
offset_option = click.option("--offset", type=float, default=0.0, show_default=True,
                             help="Added to a stack's DNs before dividing by --scale: -1000 for stacks made from "
                                  "products of processing baseline 04.00 on (2022+). Products and STAC items "
                                  "take theirs from their metadata.")
keep_clouds_option = click.option("--keep-clouds", is_flag=True,
                                  help="Keep L2A pixels classed cloud, cloud shadow, cirrus, snow or defective "
                                       "(SCL 1, 3, 8, 9, 10, 11); by default they are nodata and left out of scores.")
mask_option = click.option("--mask", "leave_out", type=click.Path(dir_okay=False, exists=True), default=None,
                           help="Raster on any grid whose nonzero pixels are left out, or a vector file of polygons "
                                "whose pixels are (nodata in outputs, not scored).")


def _parse_bbox(ctx, param, value):
    if value is None:
        return None
    try:
        return check_bbox(value)
    except S2S2NetError as exc:
        raise bad_parameter(exc.finding, ctx, param) from None


bbox_option = click.option("--bbox", callback=_parse_bbox, metavar="W,S,E,N",
                           help="Area of interest in longitude/latitude (WGS 84); only the windows covering it are read.")
aoi_option = click.option("--aoi", type=click.Path(dir_okay=False, exists=True), default=None,
                          help="Area of interest: any vector file geopandas reads, any CRS; outside its polygons is nodata.")


SCENE_OPTIONS = (bands_option, scale_option, offset_option, keep_clouds_option, mask_option, bbox_option, aoi_option)


def scene_options(command):
    """The options of how scenes are read (--bands, --scale, --offset, --keep-clouds, --mask,
    --bbox, --aoi), handed to ``command`` as one finished ``scene: SceneOptions``. A new scene
    option is one decorator in SCENE_OPTIONS and one field of SceneOptions of the same name."""
    names = [f.name for f in fields(SceneOptions)]

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        values = {name: kwargs.pop(name) for name in names}
        if values["bbox"] and values["aoi"]:
            raise bad_parameter(exclusive("--bbox", "--aoi"), click.get_current_context(), hint="--aoi")
        return command(*args, scene=SceneOptions(**values), **kwargs)

    for option in reversed(SCENE_OPTIONS):
        wrapper = option(wrapper)
    return wrapper
