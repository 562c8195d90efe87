"""The rulebook: every check s2s2net makes of what it is given, warnings and refusals alike.

Each rule has a stable code (``S2N-SCENE-NO-CRS``), what it is (a warning, or a refusal of bad
input, of options used together wrongly, of an output that exists, or a failure), and a message
template. A template names the options that settle it as ``{o.NAME}`` (``{o.offset:-1000}`` with
a value): the command line shows ``--offset -1000``, Python ``offset=-1000``. A check reports a
:class:`Finding` (``finding``) or raises one (``raise refuse(...)``); the command line prints it
with its code, ``--json`` carries the code, notebooks get it as an :class:`S2S2NetWarning`.

    >>> raise refuse("S2N-SCENE-NO-CRS", "scene.tif")
    >>> finding("S2N-OFFSET-MISSING", "scene.tif").message("python")

``s2s2net checks`` lists the rules; tests assert codes, not prose.
"""

from __future__ import annotations

import ast
import re
import string
import sys
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from .errors import InputError, OutputExistsError, S2S2NetError, UsageError, describe

_PACKAGE = str(Path(__file__).parent) + "/"  # the package's frames start so
WARNING, INPUT, USAGE, EXISTS, FAILURE = "warning", "input", "usage", "exists", "failure"
ERRORS = {INPUT: InputError, USAGE: UsageError, EXISTS: OutputExistsError, FAILURE: S2S2NetError}
INTERFACES = ("cli", "python")

# Options whose Python keyword is not the flag's name with "_" for "-".
PYTHON_KEYWORDS = {"mask": "leave_out", "source_weight": "source_weights", "pair": "pairs", "manifest": "manifests",
                   "spacing": "spacing_m", "min_width": "min_width_m", "max_width": "max_width_m",
                   "min_area": "min_area_m2", "max_bridge": "max_bridge_m", "scene": "scenes", "background": "backgrounds",
                   "co": "creation_options"}
# The commands a message points to, as each interface calls them: ``{c.calibrate}`` in a template.
COMMANDS = {"calibrate": ("s2s2net weights calibrate", "s2n.calibrate()"), "gate": ("s2s2net weights gate", "s2n.gate()"),
            "chip": ("s2s2net chip", "s2n.chip()"), "predict": ("s2s2net predict", "s2n.predict()"),
            "occurrence": ("s2s2net occurrence", "s2n.occurrence()")}
FLAG_NAMES = {keyword: flag for flag, keyword in PYTHON_KEYWORDS.items()}  # a bundle's field -> its option's name


@dataclass(frozen=True)
class Rule:
    """One check: its code, its kind (``warning``, ``input``, ``usage``, ``exists``, ``failure``)
    and the template of its message (without the file it names)."""

    code: str
    kind: str
    template: str

    @property
    def severity(self) -> str:
        return "warning" if self.kind == WARNING else "error"

    @property
    def options(self) -> tuple[str, ...]:
        """The options that settle it, by name (``offset``, ``overwrite``)."""
        fields = (f for _, f, _, _ in string.Formatter().parse(self.template) if f)
        return tuple(dict.fromkeys(f[2:] for f in fields if f.startswith("o.")))

    @property
    def values(self) -> tuple[str, ...]:
        """The values its message is made of, by name (not the options and commands it names)."""
        fields = (f for _, f, _, _ in string.Formatter().parse(self.template) if f)
        return tuple(dict.fromkeys(f for f in fields if not f.startswith(("o.", "c."))))

    def text(self, interface: str = "cli") -> str:
        """The template as ``interface`` reads it: its options named, its values as ``{name}``."""
        return _Shown(interface).format(self.template)

    def settled_by(self, interface: str) -> tuple[str, ...]:
        """The options that settle it as ``interface`` (``cli`` or ``python``) names them."""
        return tuple(format(_Option(name, interface)) for name in self.options)


class _Option:
    """An option as one interface names it: ``--offset -1000`` or ``offset=-1000``; a flag set,
    ``{o.flips:True}``, is ``--flips`` or ``flips=True``."""

    def __init__(self, name: str, interface: str):
        self.name, self.interface = name, interface

    def __format__(self, value: str) -> str:
        if self.interface == "cli":
            flag = "--" + self.name.replace("_", "-")
            return f"{flag} {value}" if value and value != "True" else flag
        keyword = PYTHON_KEYWORDS.get(self.name, self.name)
        return f"{keyword}={python_value(value)}" if value else keyword


def _is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def python_value(text: str) -> str:
    """A value of an option as Python writes it, so that a message's ``keyword=value`` can be
    typed as said: numbers, True and placeholders (``PATH``) as they are, several of them
    (``32,64,96``, ``SCENE MASK``) a tuple, a word or a file name (``bf16``) a string."""
    if "{" in text or text.startswith("<"):  # a template's value shown by its name, an object's repr: as they are
        return text
    try:
        value = ast.literal_eval(text)
        if not isinstance(value, tuple) or text.startswith("("):  # written as Python already (42, 'x', True)
            return text
    except (ValueError, SyntaxError):
        pass
    parts = [p.strip() for p in text.split(",")] if "," in text else text.split()
    if parts and all(_is_number(p) or re.fullmatch(r"[A-Z][A-Z_]*", p) for p in parts):
        return parts[0] if len(parts) == 1 else f"({', '.join(parts)})"
    return repr(text)


class _Value:
    """A value of a template, shown by its name."""

    def __init__(self, name: str):
        self.name = name

    def __format__(self, spec: str) -> str:
        return "{" + self.name + "}"


class _Shown(string.Formatter):
    """Formats a template with its options named and its values left as ``{name}``."""

    def __init__(self, interface: str):
        self.interface = interface

    def get_field(self, field_name, args, kwargs):
        if field_name.startswith("o."):
            return _Option(field_name[2:], self.interface), field_name
        if field_name.startswith("c."):
            return getattr(_Commands(self.interface), field_name[2:]), field_name
        return _Value(field_name), field_name

    def convert_field(self, value, conversion):
        return value


class _Options:
    def __init__(self, interface: str):
        self.interface = interface

    def __getattr__(self, name: str) -> _Option:
        return _Option(name, self.interface)


class _Commands:
    """The commands as one interface calls them (``s2s2net weights gate`` or ``s2n.gate()``)."""

    def __init__(self, interface: str):
        self.interface = interface

    def __getattr__(self, name: str) -> str:
        command_line, python = COMMANDS[name]
        return command_line if self.interface == "cli" else python


@dataclass(frozen=True)
class Phrase:
    """A part of messages that names options, given to a template as a value and said in each
    interface's terms (how a command is told which value of a mask means nodata)."""

    template: str

    def said(self, interface: str) -> str:
        return self.template.format(o=_Options(interface), c=_Commands(interface))

    def __str__(self) -> str:
        return self.said("cli")


def option(name: str, value=None) -> Phrase:
    """An option named in each interface's terms, as a message's value or the thing it names:
    ``--max-steps`` or ``max_steps``; with a value ``--lr -1.0`` or ``lr=-1.0``."""
    text = "" if value is None else ":" + str(value).replace("{", "{{").replace("}", "}}")
    return Phrase("{o.%s%s}" % (name, text))


DECLARE_NODATA_OPTION = Phrase("give the value that means nodata with {o.nodata}")
DECLARE_NODATA_TAG = Phrase("tag the value that means nodata (rio edit-info --nodata)")  # commands without --nodata


@dataclass(frozen=True)
class Advice:
    """A part of a message that says how to mend a raster: said one way of a file (``file``: a
    command that rewrites it) and another of what a notebook held in its place (``held``: the
    line of Python that mends the DataArray), once the finding is said of that (``Finding.at``,
    ``said_of``)."""

    file: str
    held: str
    of_held: bool = False

    def __str__(self) -> str:
        return self.held if self.of_held else self.file


def _of_held(values: Mapping[str, Any]) -> dict:
    return {k: Advice(v.file, v.held, True) if isinstance(v, Advice) else v for k, v in values.items()}


@dataclass(frozen=True)
class Finding:
    """What one check found: its code, the file (or option) it names, and the values its message
    is made of. ``str()`` is the command line's one line."""

    code: str
    path: Any = None
    values: Mapping[str, Any] = field(default_factory=dict)

    @property
    def rule(self) -> Rule:
        return RULES[self.code]

    @property
    def severity(self) -> str:
        return self.rule.severity

    def problem(self, interface: str = "cli") -> str:
        """The message without the file it names."""
        values = {k: v.said(interface) if isinstance(v, Phrase) else v for k, v in self.values.items()}
        return self.rule.template.format(o=_Options(interface), c=_Commands(interface), **values)

    def message(self, interface: str = "cli") -> str:
        """``PATH: problem`` (just the problem when it names no file)."""
        problem = self.problem(interface)
        path = self.path.said(interface) if isinstance(self.path, Phrase) else self.path  # an option, not a file
        return problem if path is None else describe(path, problem)

    def __str__(self) -> str:
        return self.message("cli")

    def __hash__(self) -> int:  # its values may be lists: the same message is the same finding
        return hash((self.code, str(self.path), self.message("cli")))

    def to_dict(self) -> dict:
        """The finding as JSON carries it."""
        return {"code": self.code, "severity": self.severity, "message": self.message("cli")}

    def at(self, path) -> Finding:
        """The same finding said of another file (a notebook's DataArray, not its temporary file)."""
        return Finding(self.code, path, _of_held(self.values))


class S2S2NetWarning(UserWarning):
    """A warning of s2s2net's rulebook, as notebooks see it; ``.finding.code`` names the rule."""

    def __init__(self, finding: Finding):
        super().__init__(finding.message("python"))
        self.finding = finding


def finding(code: str, path=None, **values) -> Finding:
    """A finding of rule ``code`` about ``path``; KeyError for a code the rulebook lacks, and for
    a value its template needs and is not given."""
    result = Finding(code, path, values)
    result.problem()  # a template and its values that do not fit fail here, where the check is
    return result


def refuse(code: str, path=None, **values) -> S2S2NetError:
    """The error to raise for a refusal of rule ``code`` (``raise refuse(...) from exc``)."""
    found = finding(code, path, **values)
    if found.rule.kind == WARNING:
        raise ValueError(f"{code} is a warning, not a refusal")
    error = ERRORS[found.rule.kind](found.message("python"))  # str() says it in its reader's terms
    error.finding = found
    return error


@contextmanager
def said_of(name, path=None):
    """A rule's refusal raised in the block said of ``name`` (a DataArray, a keyword) where it
    names the temporary file ``path`` that stood for it (any file, with ``path`` None)."""
    try:
        yield
    except S2S2NetError as exc:
        found = getattr(exc, "finding", None)
        if found is None or (path is not None and str(found.path) != str(path)):
            raise
        raise refuse(found.code, name, **_of_held(found.values)) from None


def with_warnings(error: S2S2NetError, findings) -> S2S2NetError:
    """``error`` carrying the warnings of the work it stopped (``.warnings``), which may say why:
    the command line says them before its line, the library warns them before it raises."""
    error.warnings = list(findings)
    return error


def warn(found: Finding) -> None:
    """Say ``found`` to Python's warnings machinery, in Python's terms, at the line that called
    into the package (the first frame outside it: a finding may come from deep in a batch)."""
    level, frame = 2, sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        level, frame = level + 1, frame.f_back
    warnings.warn(S2S2NetWarning(found), stacklevel=level)


def code_of(exc: BaseException) -> str | None:
    """The rule an error was raised by, if any."""
    found = getattr(exc, "finding", None)
    return found.code if found is not None else None


def with_code(exc: BaseException) -> str:
    """An error's one line as the command line says it: its message, then its rule's code."""
    code = code_of(exc)
    return f"{exc} [{code}]" if code else str(exc)


def rules_table() -> list[dict]:
    """Every rule, as ``s2s2net checks`` lists it."""
    return [{"code": r.code, "severity": r.severity, "kind": r.kind, "message": r.text("cli"), "python_message": r.text("python"),
             "cli": list(r.settled_by("cli")), "python": list(r.settled_by("python"))} for r in RULES.values()]


def _book(*rules: Rule) -> dict[str, Rule]:
    book = {}
    for rule in rules:
        if rule.code in book:
            raise ValueError(f"rule {rule.code} is written twice")
        if rule.kind not in (WARNING, *ERRORS):
            raise ValueError(f"rule {rule.code}: unknown kind {rule.kind!r}")
        book[rule.code] = rule
    return book


RULES = _book(
    # options the command line parses (and their Python keywords)
    Rule("S2N-SYSTEM-ERROR", FAILURE, "{kind}: {error}"),
    Rule("S2N-OCCURRENCE-RANK-FAILED", FAILURE, "occurrence stopped: a date of another rank cannot be counted (that "
                                                "rank's error names it)"),
    Rule("S2N-CHECK-UNKNOWN", USAGE, "no rule {name} (s2s2net checks lists them)"),
    Rule("S2N-OPTIONS-EXCLUSIVE", USAGE, "give {first} or {second}, not both"),
    Rule("S2N-OPTION-CHOICE", USAGE, "{given} is not one of {choices}"),
    Rule("S2N-OPTION-TYPE", USAGE, "{given} is not {kind}"),
    Rule("S2N-SOURCE-TYPE", USAGE, "{name} is {kind}, not {wanted}"),  # the library's arguments
    Rule("S2N-GEO-TABLE-NO-CRS", USAGE, "the {kind} has no CRS: set the one its coordinates are in "
                                        "(.set_crs(...))"),
    Rule("S2N-OPTION-RANGE", USAGE, "{given} is out of range: it is {bound}"),
    Rule("S2N-SCENES-MISSING", USAGE, "no scenes given"),
    Rule("S2N-CHIPS-MISSING", USAGE, "no chips folder given"),
    Rule("S2N-NETWORK-OPTIONS-NO-MODEL", USAGE, "{given} set how the network runs, and only water indices are "
                                                "scored ({baselines}): give {o.weights} too, or leave them out"),
    Rule("S2N-OCCURRENCE-MASKS-OPTIONS", USAGE, "{given} set how scenes are read and predicted, and "
                                                "{o.from_masks:True} counts masks already made: leave them out (to "
                                                "count part of the masks' area, give {o.like:PATH}, a raster of that "
                                                "part)"),
    Rule("S2N-OFFLOAD-ZERO-STAGE", USAGE, "{o.offload_optimizer:True} moves ZeRO's partitioned optimizer states to the "
                                          "CPU, and {o.zero_stage:0} partitions none (DeepSpeed would keep them on the "
                                          "device without a word): give {o.zero_stage:1} or 2"),
    Rule("S2N-RESUME-OVERWRITE", USAGE, "{o.resume} continues a run; {o.overwrite} starts over: not both"),
    Rule("S2N-PAIRS-MISSING", USAGE, "give {o.pair:SCENE MASK} or {o.manifest:FILE}"),
    Rule("S2N-PAIR-AS-ARGUMENTS", USAGE, "{given} given as arguments: give each scene and its mask as "
                                         "{o.pair:SCENE MASK}{pairs}, or list them in a {o.manifest:FILE}"),
    Rule("S2N-WEIGHTS-DST-MISSING", USAGE, "give the weights file to write: DST, after SRC, or {o.output}"),
    Rule("S2N-OUTPUT-AS-ARGUMENT", USAGE, "{given} given as an argument, and no {o.output}: if it is the output, "
                                          "give {o.output:{given}}"),
    # the command line's parser (Click), said in its own words
    Rule("S2N-PARSE-MISSING", USAGE, "{missing_argument_or_option}"),
    Rule("S2N-PARSE-NO-SUCH-OPTION", USAGE, "{option_not_taken}"),
    Rule("S2N-PARSE-NO-SUCH-COMMAND", USAGE, "{command_not_known}"),
    Rule("S2N-PARSE-BAD-VALUE", USAGE, "{value_not_of_the_options_type_or_range}"),
    Rule("S2N-PARSE-USAGE", USAGE, "{extra_argument_or_option_without_its_value}"),
    # inference/options.py: how a model runs
    Rule("S2N-OVERLAP-TILE", USAGE, "{o.overlap:{overlap}} is larger than the tile ({o.tile_size:{tile_size}})"),
    Rule("S2N-OVERLAP-NEGATIVE", USAGE, "{o.overlap:{overlap}} is negative"),
    Rule("S2N-TILE-SIZE", USAGE, "{o.tile_size:{tile_size}} is smaller than {least} px"),
    Rule("S2N-BATCH-SIZE", USAGE, "{o.batch_size:{batch_size}} is not a positive number of tiles"),
    Rule("S2N-PRECISION-UNKNOWN", USAGE, "{o.precision:{value}} is not one of {choices}"),
    Rule("S2N-THRESHOLD-RANGE", USAGE, "{o.threshold:{threshold}} is not a probability in 0-1"),
    Rule("S2N-BLEND-NEGATIVE", USAGE, "blend={blend} is negative"),
    Rule("S2N-DEGRADE-FACTOR", USAGE, "{o.degrade:{factor}} is not one of {choices}"),
    Rule("S2N-LABEL-EDGES", USAGE, "{o.label_edges:{value}} is not one of {choices}"),
    Rule("S2N-BANDS-NOT-LIST", USAGE, "{value!r} is not a comma-separated list of band numbers{named}"),
    Rule("S2N-BANDS-OPTION-COUNT", USAGE, "needs 6 band indexes ({bands}), got {count}"),
    Rule("S2N-BANDS-ONE-BASED", USAGE, "band indexes are 1-based"),
    Rule("S2N-NAME-VALUE", USAGE, "{item!r} is not NAME=VALUE"),
    Rule("S2N-OUTPUT-SUFFIX", USAGE, "{name}: {writes}: name it {named}"),
    Rule("S2N-CREATION-OPTIONS", USAGE, "{problems}"),
    Rule("S2N-CREATION-LOSSY", USAGE, "{given} compresses with loss: a mask's 0, 1 and 255, probabilities and counts "
                                      "would be read back as other values (use DEFLATE, ZSTD or LZW)"),
    Rule("S2N-DEVICE-UNKNOWN", USAGE, "{value!r} is not auto, cpu, cuda or cuda:N"),
    Rule("S2N-BBOX-NOT-NUMBERS", USAGE, "{value!r} is not four numbers W,S,E,N"),
    Rule("S2N-BBOX-NOT-FOUR", USAGE, "needs four numbers W,S,E,N"),
    Rule("S2N-BBOX-NOT-FINITE", USAGE, "values must be finite"),
    Rule("S2N-BBOX-LONGITUDE", USAGE, "longitudes must lie in -180..180: W,S,E,N are longitude, then "
                                      "latitude, in degrees (WGS 84), not a projected CRS's metres"),
    Rule("S2N-BBOX-LATITUDE", USAGE, "latitudes must lie in -90..90: W,S,E,N are longitude, then "
                                     "latitude, in degrees (WGS 84), not a projected CRS's metres"),
    Rule("S2N-BBOX-WEST-EAST", USAGE, "west {west:g} is not less than east {east:g}"),
    Rule("S2N-BBOX-SOUTH-NORTH", USAGE, "south {south:g} is not less than north {north:g}"),
    Rule("S2N-GAINS-NOT-NUMBERS", USAGE, "{value!r} is not a comma-separated list of numbers"),
    Rule("S2N-GAINS-RANGE", USAGE, "{value!r}: an NDWI prior gain lies in 0-100"),
    Rule("S2N-GATE-NO-INPUT", USAGE, "nothing to fit the gate on: give {o.scene:PATH} or {o.synthetic_scenes:N} "
                                     "of 1 or more"),
    Rule("S2N-CALIBRATE-GRID", INPUT, "is not on the 10 m grid of {scene} nor on its 2 m grid: calibration reads a "
                                      "label on its scene's own grid (warp it there first)"),
    Rule("S2N-SOURCE-WEIGHT-NUMBER", USAGE, "{value!r} is not a number (NAME=W)"),
    Rule("S2N-SOURCE-WEIGHT-NEGATIVE", USAGE, "{name}={value}: a weight is 0 or more"),
    # sources/checks.py: how a scene was read (warnings)
    Rule("S2N-BANDS-DESCRIBED-OTHER", WARNING, "band {index} is described as {description!r} but the model reads "
                                               "{expected} there (input {position})"),
    Rule("S2N-BANDS-UNDESCRIBED", WARNING, "its bands are not described, so they are read as {names} in that order; "
                                           "give their 1-based indexes with {o.bands} (e.g. {o.bands:3,2,1,4,5,6} for "
                                           "red, green, blue first) to say so and silence this"),
    Rule("S2N-SCALE-IMPLAUSIBLE", WARNING, "median reflectance is {median:.4g} with scale {scale:g}; values look like "
                                           "another scale (see {o.scale})"),
    Rule("S2N-SCALE-EIGHT-BIT", WARNING, "no value is above {brightest}: this looks like an 8-bit picture of the scene "
                                         "(0-255), not reflectance x {scale:g}; map the bands' own values (see {o.scale})"),
    Rule("S2N-OFFSET-MISSING", WARNING, "even the darkest 1 % of every band is brighter than {limit:g} reflectance; a "
                                        "stack from a product of processing baseline 04.00 or later (2022 on) stores DN "
                                        "= 10000 x reflectance + 1000: pass {o.offset:-1000}"),
    Rule("S2N-OFFSET-NOT-CARRIED", WARNING, "with the offset {offset} the darkest 1 % of {band} is {darkest:.3g} "
                                            "reflectance, below zero: its DNs do not seem to carry the +1000 of "
                                            "processing baseline 04.00 (a product before 2022, or a harmonized "
                                            "collection's); without the offset ({o.offset:0} for a stack) the scene is "
                                            "0.1 brighter"),
    Rule("S2N-BAND-EMPTY", WARNING, "{band} (band {index} of its file) holds no data (0) in {share:.0%} of the pixels "
                                    "where its other bands show land: the network reads it as black there, and a water "
                                    "index sees water (at a swath's edge the bands' footprints differ; a whole band "
                                    "empty is a band file that failed to read, or another band in its place)"),
    Rule("S2N-SCENE-GEOGRAPHIC", WARNING, "is in a geographic CRS ({crs}), so its mask is in degrees too: areas are "
                                          "right, but rivers measures only in metres and refuses it; {how}"),
    Rule("S2N-SCENE-SMALL", WARNING, "is {width} x {height} px: under {least} px a side the network sees little around "
                                     "each pixel, and crops this small of real scenes found up to {high:.0%} more water "
                                     "than the whole scenes did (IoU down to {iou:.2f}); predict a larger scene of the "
                                     "place where you can"),
    Rule("S2N-PIXELS-NOT-10M", WARNING, "pixels are about {metres:.3g} m, not Sentinel-2's 10 m that the network reads: "
                                        "resample the scene to 10 m first (the output's pixels are {output_metres:.3g} "
                                        "m)"),
    Rule("S2N-DATAARRAY-BANDS-UNNAMED", WARNING, "its bands are not named, so they are read as {names} in that order; "
                                                 "name them in its band coordinate (B02 ... B12, or blue, green, red, "
                                                 "nir, swir16, swir22)"),
    Rule("S2N-BANDS-TWICE", INPUT, "band {index} is given twice (as {said}): {bands} are six different bands"),
    # labels.py: what a mask's values say
    Rule("S2N-MASK-NO-WATER-NODATA", WARNING, "holds no water 1, and {share:.1%} of it is its nodata {value}, left out "
                                              "as unseen: if {value} marks water (a 0/{value} mask tagged nodata "
                                              "{value}), make it 1 and give it another nodata value"),
    Rule("S2N-MASK-VALUES", INPUT, "holds values {shown} besides water 1, land 0{declared}: {declare_nodata}, or make "
                                   "water 1 and land 0"),
    Rule("S2N-MASK-FRACTIONS", INPUT, "holds shares of water between land 0 and water 1 ({shown}), as a mask resampled "
                                      "by averaging a finer one has: resample it by nearest neighbour or mode, or cut "
                                      "it at 0.5, to make water 1 and land 0"),
    # training/chips.py
    Rule("S2N-TRAIN-FP16-ON-CPU", WARNING, "trains in fp16 on a CPU, where half precision has no fast path: "
                                           "DeepSpeed's fp16 ran at about a thirtieth of fp32's pace (4 steps "
                                           "in 154 s against 5.6 s on an Intel Xeon); {o.precision:auto} trains "
                                           "fp32 on a CPU; {o.precision:bf16} is fast on one that has bf16"),
    Rule("S2N-TRAIN-CALIBRATION-DROPPED", WARNING, "was calibrated (threshold {threshold:g}, NDWI prior gain {gain:g}{gate}); "
                                                   "the weights this run wrote are trained plain, with threshold "
                                                   "{plain:g}, no prior and no gate: calibrate them with {c.calibrate} "
                                                   "(and fit a gate with {c.gate})"),
    Rule("S2N-EVALUATE-TRAINING-PAIR", WARNING, "is marked split={split} in its manifest, a scene chip cuts training "
                                                "or validation chips from: its scores are no hold-out's (score the "
                                                "split=test rows, or chips' test_manifest.csv)"),
    Rule("S2N-REFERENCE-PART-OF-SCENE", WARNING, "covers {percent} of its scene {scene_name}, which is predicted "
                                                 "whole to score it: give {o.bbox:{bbox}} to predict only about what "
                                                 "it covers (faster; its scores then come from that window's tiles)"),
    Rule("S2N-CALIBRATE-TEST-PAIR", WARNING, "is marked split=test in its manifest: the threshold and gain were "
                                             "chosen on it too, so its scores afterwards are no hold-out's (calibrate "
                                             "on the train and val rows)"),
    Rule("S2N-CALIBRATE-GAIN-EDGE", WARNING, "scored best with the largest NDWI prior gain tried, {gain:g}: a larger "
                                             "one may score better still; try it with {o.gains:{gain:g},{larger}}"),
    Rule("S2N-OCCURRENCE-UNDATED", WARNING, "has no date (none in its metadata or name): counted, but listed undated "
                                            "after the dated ones and not used for the grid; give it one with "
                                            "{o.dates} (its scene and date)"),
    Rule("S2N-GRID-SHIFT", WARNING, "lies {dx:+.3g}, {dy:+.3g} (x, y in its CRS's units) off the 10 m and 2 m grids of "
                                    "{scene_name}, part of a cell: warped onto them, each cell is read partly from its "
                                    "neighbours; resample it onto the scene's grid first"),
    Rule("S2N-GRID-SHIFT-OUTPUT", WARNING, "lies {dx:+.3g}, {dy:+.3g} (x, y in its CRS's units) off the output grid, "
                                           "part of a cell: counted onto it, each cell is read partly from its "
                                           "neighbours; resample it onto the grid first ({o.like} names the grid)"),
    Rule("S2N-CHIP-TEST-REGIONS-MISS", WARNING, "no chip overlaps these test regions, so the test split is empty "
                                                "(regions of another place, or drawn in another CRS than they say?)"),
    Rule("S2N-CHIP-VAL-OVERLAPS-TRAIN", WARNING, "{overlapping} of {train} training chips overlap validation chips "
                                                 "of their own scene: the scenes are too small for validation blocks "
                                                 "apart from training chips at {o.stride:{stride}}, so validation chips "
                                                 "were drawn one by one, and the weights are chosen partly on pixels "
                                                 "trained on (give a larger {o.stride}, more or larger scenes, or "
                                                 "{o.val_fraction:0} and another folder to validate on)"),
    Rule("S2N-CHIP-NODATA-SKIPPED", WARNING, "{skipped} of {windows} chip windows were skipped, more than half: "
                                             "they hold more nodata than {o.max_nodata:{max_nodata:g}} allows (training "
                                             "leaves nodata out of the loss: a higher {o.max_nodata} keeps them; a "
                                             "scene reprojected to another grid has nodata corners, labels often "
                                             "leave clouds out)"),
    # world.py
    Rule("S2N-WORLD-NOT-COUNT", USAGE, "is not a whole number of {least} or more (a launcher, torchrun or deepspeed, "
                                       "sets RANK, LOCAL_RANK and WORLD_SIZE; for one process leave them unset)"),
    Rule("S2N-WORLD-RANK", USAGE, "lies outside a world of WORLD_SIZE={size} ranks (0 to WORLD_SIZE - 1)"),
    Rule("S2N-WORLD-NO-MASTER", USAGE, "several ranks meet where rank 0 listens, but {missing} unset (a launcher sets "
                                       "MASTER_ADDR and MASTER_PORT; without one set them beside RANK and WORLD_SIZE)"),
    # polygons.py
    Rule("S2N-MASK-VECTOR-KINDS", WARNING, "its polygons are of {count} kinds by its column {column} ({kinds}), "
                                         "and every one is drawn as water: keep only those of water first "
                                         "(ogr2ogr -where \"{column} IN (...)\", or a geopandas query)"),
    Rule("S2N-VECTOR-LAYERS", WARNING, "holds {count} layers; the first, {layer}, is read"),
    Rule("S2N-VECTOR-NOT-POLYGONS", INPUT, "holds {kinds} geometries, where polygons are needed (lines and points "
                                           "have no area: buffer them to the area they stand for)"),
    Rule("S2N-VECTOR-UNREADABLE", INPUT, "not a vector file geopandas can read ({error})"),
    Rule("S2N-VECTOR-IS-RASTER", INPUT, "is a raster, where a vector file of polygons is needed (polygonise the "
                                        "area first, with gdal_polygonize.py say)"),
    # aoi.py
    Rule("S2N-AOI-NO-CRS", INPUT, "AOI has no CRS"),
    Rule("S2N-AOI-EMPTY", INPUT, "AOI holds no geometry"),
    Rule("S2N-AOI-CRS", INPUT, "AOI cannot be transformed to the scene's CRS ({error})"),
    Rule("S2N-AOI-NO-OVERLAP", INPUT, "AOI does not overlap the scene {scene_name}, which covers {covers} "
                                      "(W,S,E,N in longitude/latitude){swapped}"),
    # baselines.py
    Rule("S2N-BASELINE-UNKNOWN", INPUT, "unknown baseline (choose from {choices})"),
    # batch.py
    Rule("S2N-OUTPUT-NOT-TIF", USAGE, "predict writes a GeoTIFF: name it .tif (or give a folder, ending in /)"),
    Rule("S2N-OUTPUT-IS-FILE", USAGE, "is a file; with several scenes ({names}) -o names a folder"),
    Rule("S2N-OUTPUT-NEEDS-FOLDER", USAGE, "names one mask; {count} scenes ({names}) need a folder (one mask a scene "
                                           "in it): give one ending in /"),
    Rule("S2N-INPUT-TWICE", INPUT, "is named twice (also as {other}): name each {what} once"),
    Rule("S2N-OUTPUT-SAME-NAME", USAGE, "{first} and {second} would both be written to {target}; predict them into "
                                        "separate folders"),
    Rule("S2N-OUTPUT-OTHER-SCENE", EXISTS, "holds the mask of {other}, not of {name}: {name} not skipped ({o.overwrite} "
                                           "replaces it; an -o ending in / writes one mask a scene into a folder)"),
    Rule("S2N-OUTPUT-NOT-A-MASK", EXISTS, "is no mask {c.predict} wrote: {name} not skipped ({o.overwrite} replaces "
                                          "it; an -o ending in / writes one mask a scene into a folder)"),
    Rule("S2N-OUTPUT-OTHER-MODEL", EXISTS, "holds {name}'s mask made with {was}; this run makes it with {now}: not "
                                           "skipped ({o.overwrite} replaces it)"),
    # checkpoint.py
    Rule("S2N-WEIGHTS-NO-BUNDLED", INPUT, "no bundled default model in this install; give a weights file"),
    Rule("S2N-WEIGHTS-METADATA-INVALID", INPUT, "s2s2net metadata is invalid ({error})"),
    Rule("S2N-WEIGHTS-DAMAGED", INPUT, "weights file is damaged ({error})"),
    Rule("S2N-WEIGHTS-ARCHITECTURE", INPUT, "weights do not match the architecture ({which} tensor {name})"),
    Rule("S2N-WEIGHTS-TENSOR-SHAPE", INPUT, "tensor {name} has shape {shape}, expected {expected}"),
    Rule("S2N-WEIGHTS-IS-FOLDER", INPUT, "is a folder, not a weights file"),
    Rule("S2N-WEIGHTS-IS-RUN", INPUT, "is a training run's folder, not a weights file: give {weights} (best: "
                                      "the best validation F1; last: the last step)"),
    Rule("S2N-WEIGHTS-IS-CHECKPOINT", INPUT, "is a DeepSpeed checkpoint of a training run (kept for `train "
                                             "--resume`), not a weights file: give {weights}"),
    Rule("S2N-WEIGHTS-NOT-FOUND", INPUT, "weights file not found"),
    Rule("S2N-WEIGHTS-PERMISSION", INPUT, "weights file cannot be read (permission denied)"),
    Rule("S2N-WEIGHTS-TOO-SHORT", INPUT, "not a safetensors weights file (too short)"),
    Rule("S2N-WEIGHTS-NOT-SAFETENSORS", INPUT, "not a safetensors weights file"),
    Rule("S2N-WEIGHTS-PICKLE", INPUT, "not a safetensors weights file (it looks like a Python pickle; pickles are never "
                                      "loaded)"),
    Rule("S2N-WEIGHTS-ZIP-PICKLE", INPUT, "not a safetensors weights file (it looks like a PyTorch zip pickle; pickles are "
                                          "never loaded, export to .safetensors)"),
    Rule("S2N-WEIGHTS-NOT-S2S2NET", INPUT, "a safetensors file, but not s2s2net weights (no s2s2net metadata)"),
    Rule("S2N-WEIGHTS-METADATA-JSON", INPUT, "s2s2net metadata is not valid JSON"),
    Rule("S2N-WEIGHTS-ANNOTATE-INVALID", INPUT, "weights of bands {bands}: {error}"),
    Rule("S2N-WEIGHTS-NOTE-IS-FIELD", USAGE, "{key!r} names a field of the card itself, which a training note of "
                                             "that name would only seem to change ({how})"),
    # checkpoints.py
    Rule("S2N-CHECKPOINT-NOT-WEIGHTS", INPUT, "checkpoint holds objects that are not weights; refusing to load it "
                                              "({error})"),
    # chips.py
    Rule("S2N-CHIP-NO-PAIRS", INPUT, "no scene/mask pairs given"),
    Rule("S2N-CHIP-NONE", INPUT, "no chip was cut of {windows} chip windows: {why}; nothing written"),
    Rule("S2N-CHIP-FOLDER-HAS-CHIPS", EXISTS, "already holds chips (use {o.overwrite} to replace them)"),
    Rule("S2N-CHIP-FOLDER-NOT-EMPTY", EXISTS, "is not empty and holds no chips: chip into a new or empty folder "
                                              "({o.overwrite} would add them beside what it holds)"),
    Rule("S2N-CHIP-TEST-ID", INPUT, "no scene with id {scene_id!r} (ids: {ids})"),
    Rule("S2N-CHIP-TEST-ID-SPLIT", USAGE, "names {scene_id!r}, which its manifest row marks split={split}: a "
                                         "scene is in one split; mark the row split=test or leave it out of "
                                         "{o.test_ids}"),
    Rule("S2N-CHIP-INPUT-INSIDE", USAGE, "lies in {folder}, which {o.overwrite} clears before chipping: chip into "
                                         "another folder"),
    Rule("S2N-CHIP-SCENE-SMALL", INPUT, "is {width} x {height} px, smaller than one chip of {size} px (give a smaller "
                                        "{o.size})"),
    Rule("S2N-CHIP-DEGRADED-SMALL", INPUT, "is {width} x {height} px degraded {factor}x, smaller than one chip of {size} "
                                           "px (give a smaller {o.size})"),
    Rule("S2N-CHIP-TEST-REGIONS", INPUT, "test regions are empty or have no CRS"),
    # config.py
    Rule("S2N-TRAIN-BATCH-WORLD", INPUT, "{batch_size} is not divisible by the world size {world_size}"),
    Rule("S2N-DEEPSPEED-CONFIG-CONTRADICTS", INPUT, "{key} = {theirs!r} contradicts {flag} ({ours!r})"),
    Rule("S2N-DEEPSPEED-CONFIG-BATCH", INPUT, "{key} = {theirs!r}, but a run's batch of {batch_size} on "
                                              "{world_size} rank(s) makes it {ours!r}: give the global batch by "
                                              "{o.batch_size} (or the config's train_batch_size) and leave {key} out"),
    Rule("S2N-DEEPSPEED-CONFIG-NOT-FOUND", INPUT, "DeepSpeed config not found"),
    Rule("S2N-DEEPSPEED-CONFIG-JSON", INPUT, "DeepSpeed config is not valid JSON ({error})"),
    Rule("S2N-DEEPSPEED-CONFIG-OBJECT", INPUT, "DeepSpeed config must be a JSON object"),
    Rule("S2N-DEEPSPEED-CONFIG-REFUSED", INPUT, "DeepSpeed does not take it: {error}"),
    Rule("S2N-DEEPSPEED-CONFIG-SCHEDULER", INPUT, "scheduler = {scheduler!r} would not be used: the learning rate "
         "follows {o.lr}, {o.warmup_steps} and a cosine decay to the last step; leave it out"),
    # data.py
    Rule("S2N-CHIPS-NOT-FOUND", INPUT, "chips folder not found"),
    Rule("S2N-CHIPS-NO-INDEX", INPUT, "has no index.gpkg; make chips with {c.chip}"),
    Rule("S2N-CHIPS-INDEX-UNREADABLE", INPUT, "chip index cannot be read ({error})"),
    Rule("S2N-CHIPS-INDEX-COLUMNS", INPUT, "chip index lacks column(s) {missing}"),
    Rule("S2N-CHIPS-MASK-SIZE", INPUT, "mask is {width} x {height} px; its image needs {fine_width} x {fine_height} "
                                       "(2 m) or {width_10m} x {height_10m} (10 m)"),
    Rule("S2N-CHIPS-CHIP-UNREADABLE", INPUT, "chip cannot be read ({error})"),
    Rule("S2N-CHIPS-NO-TRAIN-VAL", INPUT, "has no chips in the train or val split"),
    Rule("S2N-CHIPS-CHIP-MISSING", INPUT, "listed in index.gpkg but missing{others}: copy the chips folder whole, "
                                          "or cut it again with {c.chip}"),
    Rule("S2N-CHIPS-NO-TRAIN", INPUT, "has no chips in the train split"),
    Rule("S2N-CHIPS-SIDES", INPUT, "holds chips of {side} px, and {other} chips of {other_side} px: a batch stacks "
                                   "chips of one size; cut them at one chip size ({c.chip})"),
    Rule("S2N-TRAIN-SOURCE-WEIGHT", INPUT, "no chips folder named {name!r} among the training sources ({sources})"),
    # dataarray.py
    Rule("S2N-DATAARRAY-DIMS", INPUT, "needs dimensions (band, y, x), has {dims}"),
    Rule("S2N-DATAARRAY-SPATIAL-DIMS", INPUT, "has dimensions {dims}, none of which rioxarray knows as x and y: name "
                                              "them, {fix}"),
    Rule("S2N-DATAARRAY-SEVERAL", INPUT, "holds {count} values of {dim} besides (band, y, x): predict them one at "
                                         "a time (da.isel({dim}=0), ...); occurrence counts a cube's dates"),
    Rule("S2N-DATAARRAY-NO-BAND", INPUT, "no band {band} (looked for {looked_for} in {names})"),
    Rule("S2N-DATAARRAY-BAND-COUNT", INPUT, "{count} unnamed bands; the model needs 6 ({needs})"),
    Rule("S2N-DATAARRAY-NO-CRS", INPUT, "has no CRS (set one with da.rio.write_crs)"),
    Rule("S2N-DATAARRAY-NO-TIME", INPUT, "{what}: occurrence counts the dates of a (time, band, y, x) cube, dated by "
                                         "its time"),
    # dates.py
    Rule("S2N-DATES-UNREADABLE", INPUT, "cannot be read ({error})"),
    Rule("S2N-DATES-COLUMNS", INPUT, "needs the columns scene,date ({header})"),
    Rule("S2N-DATES-NOT-ISO", INPUT, "{where}{text!r} for {scene} is not an ISO date (YYYY-MM-DD)"),
    Rule("S2N-DATES-TWICE", INPUT, "line {line}: {scene} is given two dates, {first} and {date}"),
    Rule("S2N-DATES-NOT-NAMED", WARNING, "has no date, and {csv} does not name it (by its path as given or its "
                                         "file name, {name}): counted, but listed undated after the dated ones and "
                                         "not used for the grid"),
    # degraded.py
    Rule("S2N-DEGRADE-SCENE-SMALL", INPUT, "is {width} x {height} px, smaller than one {block} x {block} px block of "
                                           "{o.degrade:{factor}} (N x N cells, its SWIR 2 x 2 of those)"),
    # evaluate.py
    Rule("S2N-EVALUATE-MODEL-TWICE", INPUT, "two models have the same name (one given twice?)"),
    Rule("S2N-DEGRADE-REFERENCE-COARSE", INPUT, "its pixels ({reference:.4g}) are not finer than the scene degraded "
                                                "by {o.degrade:{factor}} ({coarse:.4g}, in the scene's CRS units): it"
                                                " cannot test the detail the network adds"),
    # io.py
    Rule("S2N-OUTPUT-EXISTS", EXISTS, "already exists (use {o.overwrite} to replace it)"),
    Rule("S2N-OUTPUT-PERMISSION", FAILURE, "cannot write into {parent} (no permission, or a read-only file system)"),
    Rule("S2N-OUTPUT-STDOUT", USAGE, "'-' would be a file named '-': outputs are files, not standard output "
                                     "(name a file)"),
    Rule("S2N-OUTPUT-PARENT-IS-FILE", USAGE, "cannot be written: {parent} is a file, not a folder"),
    Rule("S2N-OUTPUT-FOLDER-IS-FILE", USAGE, "is a file, where a folder is written"),
    Rule("S2N-OUTPUT-IS-INPUT", USAGE, "is also an input{held}: writing it would replace what it is made from; write "
                                       "the output elsewhere"),
    Rule("S2N-OUTPUT-WRITE-FAILED", FAILURE, "could not be written ({error})"),
    # labels.py
    Rule("S2N-MASK-UNREADABLE", INPUT, "neither a raster mask nor a vector file of water polygons that GDAL reads"),
    Rule("S2N-MASK-VECTOR-EMPTY", INPUT, "holds no water polygon"),
    Rule("S2N-MASK-NO-CRS", INPUT, "mask has no CRS"),
    Rule("S2N-MASK-ROTATED", INPUT, "mask has a rotated transform; only north-up grids are supported: {how}"),
    Rule("S2N-MASK-CRS-UNTRANSFORMABLE", INPUT, "CRS {source_crs} cannot be transformed to {target_crs}"),
    Rule("S2N-MASK-CRS-TO-SCENE", INPUT, "mask CRS cannot be transformed to the scene's ({error})"),
    Rule("S2N-MASK-CRS-INFINITE", INPUT, "mask CRS cannot be transformed to the scene's (infinite bounds)"),
    Rule("S2N-MASK-READ-FAILED", INPUT, "mask cannot be read ({error})"),
    Rule("S2N-MASK-NO-WATER-VALUE", INPUT, "holds {value} besides land 0, and no water 1: if {value} is water (a "
                                           "0/{value} mask), make it 1; if it means nodata, {declare_nodata}"),
    Rule("S2N-MASK-ALL-NODATA", INPUT, "mask has no valid pixel (all nodata)"),
    Rule("S2N-MASK-IS-PROBABILITY", INPUT, "is a water probability raster ({c.predict} {o.probability}), where a "
                                           "mask of water 1 and land 0 is needed: use the mask predict writes "
                                           "without it, or cut this one at its threshold (water from {cut} %)"),
    Rule("S2N-MASK-IS-OCCURRENCE", INPUT, "is an occurrence raster ({c.occurrence}: percent of dates seen as water, "
                                          "counts, classes), where a mask of water 1 and land 0 is needed: give a "
                                          "mask of one date"),
    Rule("S2N-MASK-BAND-COUNT", INPUT, "has {count} bands, where a mask has one (water 1, land 0)"),
    Rule("S2N-MASK-IS-SCENE", INPUT, "has {count} bands, where a mask has one (water 1, land 0): a scene is read as a "
                                     "date without {o.from_masks}"),
    Rule("S2N-MASK-NODATA-IS-CLASS", INPUT, "its nodata value is {nodata:g}, which a mask means as {kind} (water 1, "
                                            "land 0): every {kind} pixel would be left out; {declare_nodata} if "
                                            "another value means it, or remove the nodata value (rio edit-info "
                                            "--unset-nodata)"),
    # loop.py
    Rule("S2N-TRAIN-INIT-BANDS", INPUT, "reads bands {bands}; {o.water_indices} needs {needs} in that order"),
    Rule("S2N-TRAIN-TOO-FEW-CHIPS", INPUT, "{n_train} training chips{weighed} are fewer than one global batch of "
         "{batch_size}"),
    Rule("S2N-TRAIN-CHECKPOINT-UNLOADABLE", INPUT, "checkpoint could not be loaded"),
    Rule("S2N-TRAIN-FP16-UNSUPPORTED", USAGE, "fp16 asked for, which DeepSpeed {version} does not train on this CPU "
                                              "(its CPU accelerator has no fp16); {o.precision:auto} trains fp32 on a "
                                              "CPU"),
    # manifest.py
    Rule("S2N-MANIFEST-FILE-MISSING", INPUT, "file not found{where}"),
    Rule("S2N-PAIR-TWICE", INPUT, "is given twice with the mask {mask} ({first}, then {second}): the pair would "
                                  "count twice in what is pooled; give it once"),
    Rule("S2N-MANIFEST-ID-TWICE", INPUT, "scene id {scene_id!r} appears twice ({first} and {second}): {fix}"),
    Rule("S2N-MANIFEST-COLUMNS", INPUT, "manifest lacks column(s) {missing} (needs image (or scene),mask; {header})"),
    Rule("S2N-MANIFEST-NOT-FOUND", INPUT, "manifest not found"),
    Rule("S2N-MANIFEST-UNREADABLE", INPUT, "not a readable CSV manifest ({error})"),
    Rule("S2N-MANIFEST-EMPTY", INPUT, "manifest has no rows"),
    Rule("S2N-MANIFEST-EMPTY-CELL", INPUT, "line {n}: empty image or mask"),
    Rule("S2N-MANIFEST-SPLIT", INPUT, "line {n}: split {split!r} is not train, val or test"),
    # occurrence.py
    Rule("S2N-RASTER-UNREADABLE", INPUT, "not a raster rasterio can read"),
    Rule("S2N-RASTER-GCPS", INPUT, "is georeferenced by {count} ground control points, not by a grid of pixels: "
                                   "{how}"),
    Rule("S2N-RASTER-SOUTH-UP", INPUT, "its rows run from south to north (a positive pixel height, as a raster written "
                                       "from ascending y coordinates has): write it north-up first, in Python: {fix}"),
    Rule("S2N-OCCURRENCE-ACQUISITION-TWICE", INPUT, "holds the same acquisition as {other} ({acquisition}): it would "
                                                    "be counted as two dates; name one of them"),
    Rule("S2N-OCCURRENCE-MASK-UNREADABLE", INPUT, "mask cannot be read"),
    Rule("S2N-OCCURRENCE-NO-OVERLAP", INPUT, "does not overlap the output grid"),
    Rule("S2N-OCCURRENCE-LIKE-NO-GRID", INPUT, "{why}: it names no grid to count on ({o.like})"),
    # open.py
    Rule("S2N-BANDS-NOT-STACK", INPUT, "{o.bands} applies to stacks; a {kind} names its bands"),
    Rule("S2N-OFFSET-NOT-STACK", INPUT, "{o.offset} applies to stacks; a {kind} states its offset in its metadata "
                                        "({offsets})"),
    Rule("S2N-SCALE-NOT-STACK", INPUT, "{o.scale} applies to stacks; a {kind} states its scale in its metadata "
                                       "({scale:g})"),
    Rule("S2N-SCENE-SCALES-DIFFER", INPUT, "its bands' scale metadata differ or are 0 ({scales}): give {o.scale} and "
                                           "{o.offset} for the bands as stored"),
    Rule("S2N-SCENE-SCALE-CONTRADICTED", INPUT, "its band metadata say reflectance = (DN {offset:+g}) / {scale:g} "
                                                "({o.scale:{scale:g}} {o.offset:{offset:g}}), which {o.scale}/"
                                                "{o.offset} contradict: leave them out"),
    Rule("S2N-LEAVE-OUT-UNREADABLE", INPUT, "{o.mask} is neither a readable raster nor a vector file of polygons "
                                            "({error})"),
    Rule("S2N-LEAVE-OUT-NO-CRS", INPUT, "{o.mask} has no CRS"),
    Rule("S2N-LEAVE-OUT-EMPTY", INPUT, "{o.mask} holds no polygons, so it would leave nothing out"),
    Rule("S2N-LEAVE-OUT-NO-OVERLAP", INPUT, "{o.mask} does not overlap the scene {scene_name}, so it would leave "
                                            "nothing out"),
    Rule("S2N-MASK-NO-OVERLAP", INPUT, "does not overlap its scene {scene_name}"),
    Rule("S2N-NODATA-POLYGONS", WARNING, "is water polygons, where {o.nodata} ({nodata:g}) means nothing: every "
                                         "pixel outside its polygons is land (leave out what was not seen with "
                                         "{o.mask})"),
    # painted.py
    Rule("S2N-BACKGROUND-SCALE", INPUT, "is read with scale {scale:g}, and a background holds DNs of scale "
                                        "{expected:g} (uint16, {expected:g} x reflectance, which its pairs are "
                                        "written in): write it so first"),
    Rule("S2N-BACKGROUND-UNREADABLE", INPUT, "cannot open background scene"),
    Rule("S2N-BACKGROUND-BANDS", INPUT, "background must be 6 uint16 bands B02..B12 (has {count} {dtype})"),
    Rule("S2N-BACKGROUND-LEVEL", INPUT, "tag level={level!r} is not L1C or L2A"),
    Rule("S2N-BACKGROUND-NO-LEVEL", WARNING, "has no tag level: painted as L2A (surface reflectance); if it is L1C "
                                             "(top of atmosphere), give {o.level:L1C}, so that the water painted "
                                             "into it gets its haze"),
    Rule("S2N-BACKGROUND-LEVEL-CONTRADICTED", USAGE, "is {own} ({said_by}), and {o.level:{level}} says it is "
                                                     "{level}: leave {o.level} out, or give a scene of that level"),
    Rule("S2N-BACKGROUND-SMALL", WARNING, "is {width} x {height} px, smaller than {o.size:{size}}: its pairs are "
                                          "{crop_width} x {crop_height} px"),
    Rule("S2N-SYNTH-MEMORY", INPUT, "draws each scene whole at 2 m in memory, about {need:.0f} GB, and this machine "
                                    "has {free:.0f} GB free: give {largest} or less (a larger area is several "
                                    "scenes)"),
    Rule("S2N-SYNTH-BACKGROUND-SHAPED", USAGE, "{given} shapes generated landscapes; a pair painted into a "
                                               "{o.background} keeps that scene's own land (give one or the other)"),
    Rule("S2N-SYNTH-READING-NO-BACKGROUND", USAGE, "{given} say how a scene of {o.background} is read, and none is "
                                                   "given: generated scenes are written in the model's band order, "
                                                   "without an offset"),
    # rivers.py
    Rule("S2N-RIVERS-WIDTHS", USAGE, "{o.min_width:{low:g}} is not below {o.max_width:{high:g}}: no channel could be "
                                     "measured"),
    Rule("S2N-RIVERS-NOT-PROJECTED", INPUT, "has no projected CRS, and river widths are measured in metres: {how}"),
    Rule("S2N-RIVERS-NOT-SQUARE", INPUT, "its pixels are not square and north-up, as river widths need"),
    Rule("S2N-RIVERS-NOT-OCCURRENCE", USAGE, "is no occurrence raster of {c.occurrence} (its software tag says "
                                             "so), and {o.min_occurrence} cuts one"),
    Rule("S2N-RIVERS-GIVEN-SCENE", INPUT, "has {count} bands of reflectance, a scene: rivers are measured on a water "
                                          "mask; map the scene's water first with {c.predict} (its {o.rivers} does "
                                          "both)"),
    # run_folder.py
    Rule("S2N-RESUME-NOTHING", INPUT, "nothing to resume: no run was started there (leave out {o.resume} to start one)"),
    Rule("S2N-RUN-EXISTS", EXISTS, "already exists (use {o.resume} to continue or {o.overwrite} to start over)"),
    Rule("S2N-RUN-NO-CHECKPOINT", EXISTS, "holds a run that stopped before its first checkpoint, so there is nothing "
                                          "to resume: {o.overwrite} starts it over"),
    Rule("S2N-RUN-NOT-A-RUN", EXISTS, "already exists and holds no training run: give a new or empty folder, or "
                                      "{o.overwrite} to empty it first"),
    Rule("S2N-RUN-INPUT-INSIDE", USAGE, "lies in {run_dir}, which {o.overwrite} empties before training: train into "
                                        "another folder (or move it out first)"),
    Rule("S2N-RESUME-CONFIG-UNREADABLE", INPUT, "cannot be read to resume the run ({error})"),
    Rule("S2N-RESUME-WORLD", INPUT, "was started with {ranks} and {o.batch_size:{batch_was}}; resume it with the same"
                                    " (this run: {ranks_now}, {o.batch_size:{batch_size}})"),
    Rule("S2N-RESUME-WATER-INDICES", INPUT, "was started {with_or_without} {o.water_indices}; resume it the same way"),
    Rule("S2N-RESUME-LABEL-EDGES", INPUT, "was started with {o.label_edges:{started_edges}}; resume it the same way"),
    Rule("S2N-RESUME-CHIPS", INPUT, "was started on the chips of {was}; resume it on the same (this run: {now})"),
    Rule("S2N-RESUME-CHIPS-CHANGED", INPUT, "was started on {source} holding {train_was} train and {val_was} val "
                                            "chips, which holds {train} and {val} now (chipped again?): resume it on "
                                            "the chips it started on, or start a new run from its weights "
                                            "({o.init_weights:{weights}})"),
    Rule("S2N-RESUME-DEEPSPEED-CONFIG", INPUT, "was started with DeepSpeed's {key} = {was}; resume it with the "
                                               "same (this run: {now}): give the options and {o.deepspeed_config} "
                                               "it was started with (its config.json records them)"),
    Rule("S2N-RESUME-OPTION", INPUT, "was started with {flag} {was}; resume it with the same (this run: {now}), or "
                                     "start a new run from its weights ({o.init_weights:{weights}})"),
    # runtime.py
    Rule("S2N-DEVICE-NO-CUDA", INPUT, "asks for a GPU, and there is none: {why}; {o.device:auto} runs on a GPU "
                                      "where there is one, else on the CPU"),
    Rule("S2N-DEVICE-NO-SUCH-GPU", INPUT, "there is no such GPU: torch sees {count} here, cuda:0 to cuda:{last} "
                                          "(CUDA_VISIBLE_DEVICES numbers those it shows from 0); {o.device:cuda} "
                                          "takes each rank's own"),
    Rule("S2N-WEIGHTS-BANDS", INPUT, "weights were trained on bands {trained}; s2s2net reads {reads}"),
    Rule("S2N-INT8-NO-RANGES", INPUT, "weights carry no int8 ranges for {o.precision:int8} ({c.gate} records them)"),
    Rule("S2N-INT8-NOT-X86", INPUT, "{o.precision:int8} runs on x86 CPUs with AVX2 or AVX-512, not on {device}"),
    # safe.py
    Rule("S2N-SAFE-REMOTE", INPUT, "remote SAFE products are not read; give a local .SAFE folder or .zip, or the "
                                   "product's STAC item"),
    Rule("S2N-SAFE-XML", INPUT, "{metadata_name} is not readable XML ({error})"),
    Rule("S2N-SAFE-GRANULES", INPUT, "holds {granules} granules (a product from before 2016); only single-tile "
                                     "products are read"),
    Rule("S2N-SAFE-NO-BAND-FILES", INPUT, "{metadata_name} lists no band files (IMAGE_FILE)"),
    Rule("S2N-SAFE-NO-BAND-FILE", INPUT, "{metadata_name} lists no file for band {band}"),
    Rule("S2N-SAFE-BAND-MISSING", INPUT, "band file {member} is missing"),
    Rule("S2N-SAFE-SCALE", INPUT, "{prefix}QUANTIFICATION_VALUE {scale:g} is not positive"),
    Rule("S2N-SAFE-NO-METADATA", INPUT, "is not a Sentinel-2 product: no MTD_MSIL1C.xml or MTD_MSIL2A.xml in it"),
    Rule("S2N-SAFE-NOT-METADATA", INPUT, "is not a Sentinel-2 product's metadata (MTD_MSIL1C.xml or MTD_MSIL2A.xml)"),
    Rule("S2N-FILE-NOT-FOUND", INPUT, "not found"),
    Rule("S2N-FILE-IS-PATTERN", USAGE, "is a pattern no shell expanded ({count} file(s) match it): unquoted, "
                                     "the shell gives each file; from Python, give glob.glob(pattern)"),
    Rule("S2N-SAFE-ZIP", INPUT, "is not a readable zip file ({error}): a download cut short reads so; fetch it "
                                "again"),
    Rule("S2N-SAFE-NO-METADATA-ZIP", INPUT, "is not a Sentinel-2 product: no MTD_MSIL1C.xml or MTD_MSIL2A.xml in the "
                                            "zip, nor band files named for their bands (..._B02_10m.tif), "
                                            "nor a raster"),
    Rule("S2N-ZIP-SEVERAL-RASTERS", INPUT, "holds {count} rasters ({names}): name the one to read as GDAL "
                                           "does, {one}"),
    Rule("S2N-SAFE-NOT-NUMBER", INPUT, "{what} {text!r} is not a number"),
    Rule("S2N-SAFE-NOT-FINITE", INPUT, "{what} is not finite"),
    # band_folder.py
    Rule("S2N-BAND-FOLDER-MISSING", INPUT, "holds band files ({held}) and none named for {band}: a folder (or zip) "
                                           "of band files needs B02, B03, B04, B08, B11 and B12, each named for its band "
                                           "(..._B02_10m.tif)"),
    Rule("S2N-BAND-FOLDER-TWICE", INPUT, "holds two files for {band} at one pixel size ({files}): leave one of "
                                         "them in it"),
    # scene.py
    Rule("S2N-SCENE-UNREADABLE", INPUT, "not a readable raster ({error})"),
    Rule("S2N-SCENE-IS-FOLDER", INPUT, "is a folder, not a scene{holds}: a scene is a stack (GeoTIFF or VRT), a "
                                       "folder of band files named for their bands (..._B02_10m.tif ... "
                                       "..._B12_20m.tif), a product (.SAFE folder or .zip) or a STAC item"),
    Rule("S2N-SCENE-IS-VECTOR", INPUT, "is a vector file, not a scene (a stack, a product or a STAC item); of a "
                                       "pair, the scene comes first and its mask second"),
    Rule("S2N-SCENE-DTYPE", INPUT, "has dtype {dtype}, which cannot hold reflectance (expected uint16, int16 or "
                                   "float){mask_like}"),
    Rule("S2N-BANDS-COUNT", INPUT, "{count} band indexes given; the model needs {n_bands}"),
    Rule("S2N-BANDS-INDEX", INPUT, "has {count} band(s); band index {index} does not exist"),
    Rule("S2N-SCENE-BAND-COUNT", INPUT, "has {count} band(s); the model needs {n_bands} ({needs}){lacking}"),
    Rule("S2N-BANDS-AMBIGUOUS", INPUT, "has {count} bands and its band descriptions do not say which are {needs} "
                                       "(they name {said}): give their 1-based indexes with {o.bands}{product}"),
    Rule("S2N-SCENE-NO-CRS", INPUT, "has no CRS; a scene must be georeferenced"),
    Rule("S2N-SCENE-ROTATED", INPUT, "has a rotated or sheared transform; only north-up grids are supported: {how}"),
    Rule("S2N-SCENE-NO-TRANSFORM", INPUT, "has no usable geotransform (expected north-up pixels)"),
    Rule("S2N-SCENE-WINDOW-UNREADABLE", INPUT, "cannot be read at rows {r0}-{r1}, columns {c0}-{c1} ({error})"),
    Rule("S2N-LEAVE-OUT-READ-FAILED", INPUT, "{o.mask} cannot be read ({error})"),
    Rule("S2N-SCENE-DAMAGED", INPUT, "cannot be read, damaged or truncated ({error})"),
    Rule("S2N-SCENE-ALL-NODATA", INPUT, "has no valid pixel (all nodata)"),
    # stac.py
    Rule("S2N-STAC-EMPTY", INPUT, "ItemCollection holds no items"),
    Rule("S2N-STAC-NOT-ITEM", INPUT, "is not a STAC item (a GeoJSON Feature with assets)"),
    Rule("S2N-STAC-COLLECTION-NOT-ITEM", INPUT, "is a STAC ItemCollection of {count} items, where one scene belongs: "
                                                "name one of them as FILE#ITEM_ID (e.g. {example})"),
    Rule("S2N-STAC-NO-ASSET", INPUT, "item has no asset for band {band} (looked for {looked_for})"),
    Rule("S2N-STAC-NO-HREF", INPUT, "asset {key!r} has no href"),
    Rule("S2N-STAC-SCALES-DIFFER", INPUT, "the bands' raster:bands scales differ ({scales})"),
    Rule("S2N-STAC-UNREADABLE", INPUT, "cannot be read as a STAC item ({error})"),
    Rule("S2N-STAC-HREF-MISSING", INPUT, "asset href {href} does not exist"),
    # vrt.py
    Rule("S2N-PRODUCT-BAND-CRS", INPUT, "band {name} is in another CRS than B02"),
    Rule("S2N-PRODUCT-BAND-DTYPE", INPUT, "band {name} holds {dtype} and B02 {b02_dtype}: the six bands are read as "
                                          "one type, and would not keep their values (write them as one)"),
    Rule("S2N-PRODUCT-BAND-UNREADABLE", INPUT, "band {name} cannot be read from {file} ({error})"),
    Rule("S2N-PRODUCT-BAND-GRID", INPUT, "band {name} is not on the 10 m grid of B02 or a multiple of it ({metres:g} "
                                         "m pixels at offset {x_off:g}, {y_off:g})"),
    # writer.py
    Rule("S2N-SCENE-READ-FAILED", INPUT, "cannot be read ({error})"),
)
