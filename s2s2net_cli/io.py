"""Writing outputs safely: refuse to replace without --overwrite, write under a temporary
name beside the target and rename when complete, so no half-written file looks finished."""

from __future__ import annotations

import contextlib
import glob
import logging
import os
import re
import shutil
from pathlib import Path

from affine import Affine
from rasterio.errors import RasterioIOError
from rasterio.io import MemoryFile
from rasterio.shutil import copy as copy_dataset

from .errors import first_line
from .rulebook import refuse

UMASK = os.umask(0o022)  # the process's umask, read (os.umask sets it too) and restored below
os.umask(UMASK)

# creation options that rasterio's profile spells in lower case
_PROFILE_KEYS = {"blockxsize", "blockysize", "tiled", "compress", "predictor", "zlevel", "zstd_level", "interleave"}


def geotiff_profile(shape: tuple[int, int, int], dtype: str, crs, transform, nodata=None, block: int = 256,
                    creation_options: dict | None = None) -> dict:
    """The one GeoTIFF every output of the house is, of ``shape`` (bands, height, width): tiled in
    ``block`` px squares (strips when smaller than a block), deflate with horizontal differencing
    for integers, BigTIFF when needed; ``creation_options`` (--co NAME=VALUE) on top."""
    count, height, width = shape
    profile = {"driver": "GTiff", "width": width, "height": height, "count": count, "dtype": dtype, "crs": crs,
               "transform": transform, "nodata": nodata, "compress": "deflate", "BIGTIFF": "IF_SAFER"}
    if min(width, height) >= block:
        profile.update(tiled=True, blockxsize=block, blockysize=block)
    if "int" in str(dtype):
        profile["predictor"] = 2
    profile.update({k.lower() if k.lower() in _PROFILE_KEYS else k: v for k, v in (creation_options or {}).items()})
    return profile


def creation_option_problems(creation_options: dict, cog: bool = False) -> list[str]:
    """What GDAL says of ``creation_options`` (--co) as a small GeoTIFF is made with them in
    memory and, with ``cog``, copied to a COG (which takes them under its own names, and makes
    the file that is kept): an unknown option or an unexpected value (of which GDAL only warns,
    then writes the file without them: a COMPRESS=ZSTD a build lacks gives an uncompressed file),
    or an error (a block size that is no multiple of 16)."""
    profile = geotiff_profile((1, 512, 512), "uint8", None, Affine(2, 0, 0, 0, -2, 0), 255, creation_options=creation_options)
    with MemoryFile() as memory, MemoryFile() as copied:
        said = _what_gdal_says(lambda: memory.open(**profile).close())
        if cog and not any(name is None for name, _ in said):  # the GeoTIFF is made: what the COG takes is what counts
            said = _what_gdal_says(lambda: copy_dataset(memory.name, copied.name, driver="COG",
                                                        **cog_options(profile, creation_options)))
    return [text for _, text in said]


def _what_gdal_says(action) -> list[tuple[str | None, str]]:
    """(creation option named, text) of each warning about a creation option GDAL logs while
    ``action()`` runs, and (None, text) of the error it raises, if any."""
    said: list[tuple[str | None, str]] = []

    class Heard(logging.Handler):
        def emit(self, record):
            text = re.sub(r"^CPLE_\w+ in ", "", record.getMessage()).rstrip(".")
            named = re.search(r"creation option (\w+)|for (\w+) creation option|^(\w+)=\S* value not recognised", text)
            name = next(filter(None, named.groups())).upper() if named else None
            if name and name not in {n for n, _ in said}:  # GDAL may say it twice, in two ways
                said.append((name, text))

    logger, heard = logging.getLogger("rasterio._env"), Heard(logging.WARNING)
    level = logger.level
    logger.addHandler(heard)
    logger.setLevel(logging.WARNING)
    try:
        action()
    except Exception as exc:  # noqa: BLE001 - whatever GDAL refuses, said as GDAL says it
        said.append((None, re.sub(r"^[\w/.-]+\.tif: ", "", first_line(exc)).rstrip(".")))  # without the in-memory name
    finally:
        logger.removeHandler(heard)
        logger.setLevel(level)
    return said


def check_output(path, overwrite: bool, inputs=()) -> Path:
    """Refuse an existing ``path`` unless ``overwrite``, and always when it is one of ``inputs``
    (check_not_inputs); check its folder can be written."""
    path = Path(path)
    check_not_inputs([path], inputs)
    if path.exists() and not overwrite:
        raise refuse("S2N-OUTPUT-EXISTS", path)
    parent = path.parent if str(path.parent) else Path(".")
    if parent.exists() and not os.access(parent, os.W_OK):
        raise refuse("S2N-OUTPUT-PERMISSION", path, parent=parent)
    return path


def check_not_inputs(paths, inputs) -> None:
    """UsageError when one of the output ``paths`` is one of ``inputs`` (the same file by any path
    to it; None and URLs among them are passed over): with --overwrite it would replace what it
    is made from. Each file is looked at once, however many outputs a batch has."""
    known = {}
    for item in inputs:
        identity = _file_identity(item)
        if identity is not None:
            known.setdefault(identity, str(item))
    for path in paths if known else ():
        same = known.get(_file_identity(path))
        if same is not None:
            held = "" if same == str(path) else f" ({same})"
            raise refuse("S2N-OUTPUT-IS-INPUT", path, held=held)


def lies_in(path, folder) -> bool:
    """Whether ``path`` is ``folder`` or lies anywhere in it (links and ``..`` resolved): what
    clearing ``folder`` would delete."""
    path, folder = Path(os.path.realpath(path)), Path(os.path.realpath(folder))
    return path == folder or folder in path.parents


def _file_identity(path) -> tuple[int, int] | None:
    """The device and inode of the file ``path`` names (what os.path.samefile compares); None
    for None, a URL or a path to nothing."""
    if path is None:
        return None
    try:
        info = os.stat(path)
    except (OSError, ValueError, TypeError):
        return None
    return info.st_dev, info.st_ino


def temporary_sibling(path) -> Path:
    """A hidden name beside ``path`` that keeps its suffix (drivers pick formats by suffix) and
    names the process writing it."""
    path = Path(path)
    return path.with_name(f".{path.stem}.tmp{os.getpid()}{path.suffix}")


def remove_stale_siblings(path) -> list[Path]:
    """Remove the temporary siblings of ``path`` that a killed run left (their process is
    gone, as after SIGKILL or a crash); the paths removed."""
    path = Path(path)
    folder = path.parent if str(path.parent) else Path(".")
    pattern = re.compile(r"^\.+" + re.escape(path.stem) + r"\.tmp(\d+)")
    stale = []
    for sibling in folder.glob(f".*{glob.escape(path.stem)}.tmp*") if folder.is_dir() else ():
        match = pattern.match(sibling.name)
        if match and int(match.group(1)) != os.getpid() and not _process_alive(int(match.group(1))):
            _remove(sibling)
            stale.append(sibling)
    return stale


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


@contextlib.contextmanager
def atomic_path(path):
    """Yield a temporary path; on success rename it to ``path`` (a file with the permissions a
    plain open() gives, whatever wrote it), on any failure remove it. Temporary files that a
    killed run left beside ``path`` are removed first."""
    path = Path(path)
    if str(path.parent):
        path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_siblings(path)
    tmp = temporary_sibling(path)
    try:
        yield tmp
        if tmp.is_file():
            os.chmod(tmp, 0o666 & ~UMASK)  # safetensors writes 0600
        os.replace(tmp, path)
    except RasterioIOError as exc:  # an OSError too: GDAL's, reading an input or writing our file
        _remove(tmp)
        if tmp.name in str(exc):  # an error writing our file (disk full, ...), not reading an input
            raise refuse("S2N-OUTPUT-WRITE-FAILED", path, error=first_line(exc)) from exc
        raise
    except OSError as exc:
        _remove(tmp)
        raise refuse("S2N-OUTPUT-WRITE-FAILED", path, error=exc.strerror or exc) from exc
    except BaseException:
        _remove(tmp)
        raise


@contextlib.contextmanager
def atomic_file_set(path):
    """As atomic_path, for formats written as several files that share a stem (a shapefile's
    .shp, .shx, .dbf, .prj, .cpg): yield a path of that name in a hidden temporary folder
    beside ``path``; on success move each of its files beside ``path``, ``path`` itself last,
    so the file a reader opens appears only once its companions are there."""
    path = Path(path)
    if str(path.parent):
        path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_siblings(path)
    folder = temporary_sibling(path).with_suffix("")
    folder.mkdir()
    try:
        yield folder / path.name
        for part in sorted(folder.iterdir(), key=lambda p: p.name == path.name):
            os.chmod(part, 0o666 & ~UMASK)
            os.replace(part, path.with_name(part.name))
    except OSError as exc:
        raise refuse("S2N-OUTPUT-WRITE-FAILED", path, error=exc.strerror or exc) from exc
    finally:
        _remove(folder)


def _remove(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()


def copy_to_cog(src_path, dst_path, profile: dict, creation_options: dict | None = None, overviews: str = "MODE") -> None:
    """Copy a GeoTIFF to a Cloud Optimized GeoTIFF, its overviews resampled by ``overviews``
    (MODE for classes and counts of a mask, AVERAGE for probabilities), the user's --co options
    carried over under the COG driver's names."""
    copy_dataset(str(src_path), str(dst_path), driver="COG", **cog_options(profile, creation_options, overviews))


_COG_NAMES = {"ZLEVEL": "LEVEL", "ZSTD_LEVEL": "LEVEL", "JPEG_QUALITY": "QUALITY", "BLOCKXSIZE": "BLOCKSIZE"}


def cog_options(profile: dict, creation_options: dict | None = None, overviews: str = "MODE") -> dict:
    """The COG driver's creation options for a copy of a GeoTIFF made with ``profile``: the
    user's --co options under the COG driver's names, overviews resampled by ``overviews``."""
    options = {"COMPRESS": str(profile.get("compress", "deflate")).upper(), "PREDICTOR": "YES", "BLOCKSIZE": 512,
               "BIGTIFF": "IF_SAFER", "OVERVIEW_RESAMPLING": overviews}
    for key, value in (creation_options or {}).items():
        key = _COG_NAMES.get(key.upper(), key.upper())
        if key not in ("TILED", "BLOCKYSIZE", "INTERLEAVE"):  # a COG is always tiled, with square blocks
            options[key] = value
    return options
