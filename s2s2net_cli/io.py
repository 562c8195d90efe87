"""Writing outputs safely: refuse to replace without --overwrite, write under a temporary
name beside the target and rename when complete, so no half-written file looks finished."""

from __future__ import annotations

import contextlib
import errno
import glob
import logging
import os
import re
import shutil
from pathlib import Path

import rasterio
from affine import Affine
from rasterio.errors import RasterioIOError
from rasterio.io import MemoryFile
from rasterio.shutil import copy as copy_dataset

from .errors import S2S2NetError, first_line
from .formats import OutputKind
from .rulebook import option, refuse

UMASK = os.umask(0o022)  # the process's umask, read (os.umask sets it too) and restored below
os.umask(UMASK)

# GDAL decodes and compresses a GeoTIFF's blocks in as many threads (GDAL_NUM_THREADS where the
# user set it): predict reads and writes between the network's batches on a CPU, whose cores are
# then free (a full tile's reads 7.9 -> 4.1 s and writes 8.3 -> 4.7 s on two cores)
GDAL_THREADS = "ALL_CPUS"
# the first GDAL whose threaded GeoTIFF reads are used: before it, a damaged or truncated block
# decoded in a thread read as zeros without an error (GDAL 3.6.4, rasterio 1.3.9's wheels;
# 3.8.4, rasterio 1.3.10's, raises as a read in one thread does), so a cut file looked whole
GDAL_THREADS_FROM = (3, 8)


def gdal_threads() -> rasterio.Env:
    """The GDAL setting under which datasets are opened or created to use GDAL_THREADS (the
    GTiff driver takes it when a file is opened or created), one thread before GDAL
    GDAL_THREADS_FROM; a user's own GDAL_NUM_THREADS kept. The same pixels and bytes."""
    major, minor = (int(part) for part in rasterio.__gdal_version__.split(".")[:2])
    threads = GDAL_THREADS if (major, minor) >= GDAL_THREADS_FROM else "1"
    return rasterio.Env(GDAL_NUM_THREADS=os.environ.get("GDAL_NUM_THREADS", threads))


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


def check_creation_options(creation_options: dict | None, cog: bool = False) -> None:
    """Refuse GeoTIFF creation options (--co) that would change the values written (a lossy
    compression) or that GDAL does not take (it would only warn, out of sight, and write the
    file without them): UsageError naming the option."""
    if not creation_options:
        return
    lossy = lossy_compression(creation_options)
    if lossy:
        raise refuse("S2N-CREATION-LOSSY", option("co"), given=lossy)
    problems = creation_option_problems(creation_options, cog)
    if problems:
        raise refuse("S2N-CREATION-OPTIONS", option("co"), problems="; ".join(problems))


def lossy_compression(creation_options: dict) -> str | None:
    """The creation options that make GDAL compress with loss (JPEG; WEBP and JXL unless
    lossless; LERC with a MAX_Z_ERROR), as given; None when every value is kept."""
    given = {str(k).upper(): str(v).strip().upper() for k, v in creation_options.items()}
    method = given.get("COMPRESS", "")
    if method == "JPEG":
        return "COMPRESS=JPEG"
    if method == "WEBP" and given.get("WEBP_LOSSLESS", "NO") not in ("YES", "TRUE", "ON", "1"):
        return "COMPRESS=WEBP without WEBP_LOSSLESS=YES"
    if method == "JXL" and given.get("JXL_LOSSLESS", "YES") in ("NO", "FALSE", "OFF", "0"):
        return f"COMPRESS=JXL with JXL_LOSSLESS={given['JXL_LOSSLESS']}"
    if method.startswith("LERC") and given.get("MAX_Z_ERROR", "0") not in ("0", "0.0", ""):
        return f"COMPRESS={method} with MAX_Z_ERROR={given['MAX_Z_ERROR']}"
    return None


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
    level, propagate = logger.level, logger.propagate
    logger.addHandler(heard)
    logger.setLevel(logging.WARNING)
    logger.propagate = False  # heard here, and said once in the refusal: not on stderr as well
    try:
        action()
    except Exception as exc:  # noqa: BLE001 - whatever GDAL refuses, said as GDAL says it
        said.append((None, re.sub(r"^[\w/.-]+\.tif: ", "", first_line(exc)).rstrip(".")))  # without the in-memory name
    finally:
        logger.removeHandler(heard)
        logger.setLevel(level)
        logger.propagate = propagate
    return said


def check_output(path, overwrite: bool, inputs=(), kind: OutputKind | None = None) -> Path:
    """Refuse an existing ``path`` unless ``overwrite``, and always when it is one of ``inputs``
    (check_not_inputs), or named for another format than its ``kind``; check its folder can be
    written (a file made there and removed, where the folder exists)."""
    if kind is not None:
        check_suffix(path, kind)  # as given: a Path would lose a trailing /
    path = Path(path)
    check_not_stdout(path)
    check_not_inputs([path], inputs)
    check_parents(path)
    if path.exists() and not overwrite:
        raise refuse("S2N-OUTPUT-EXISTS", path)
    parent = path.parent if str(path.parent) else Path(".")
    nearest = next((p for p in (parent, *parent.parents) if p.exists()), None)  # where its folders would be made
    if nearest is not None and not os.access(nearest, os.W_OK):
        raise refuse("S2N-OUTPUT-PERMISSION", path, parent=nearest)
    probe = temporary_sibling(path)
    if nearest == parent and not probe.exists():  # os.access says yes to root, also where nothing can be made
        check_writable(probe, path)
    return path


def check_not_stdout(path) -> None:
    """UsageError for an output named "-", which other tools read as standard output: s2s2net
    writes files, and would write one called "-"."""
    if str(path) == "-":
        raise refuse("S2N-OUTPUT-STDOUT", None)


def check_parents(path) -> None:
    """UsageError when a file stands where a folder of ``path`` would be made (``-o notes.txt/w.tif``):
    the folders of an output are made as it is written, and that would fail half-way."""
    for ancestor in Path(path).parents:
        if ancestor.exists():  # the nearest one there; those above it are there too
            if not ancestor.is_dir():
                raise refuse("S2N-OUTPUT-PARENT-IS-FILE", path, parent=ancestor)
            return


def check_folder_output(path) -> None:
    """UsageError when the output folder ``path`` (of chips, of a run) is a file, or lies under one."""
    check_not_stdout(path)
    if Path(path).exists() and not Path(path).is_dir():
        raise refuse("S2N-OUTPUT-FOLDER-IS-FILE", path)
    check_parents(path)


def check_suffix(path, kind: OutputKind) -> None:
    """Refuse an output named for another format than the one it is written in (a GeoTIFF called
    .png, a PNG called .tif): it would open as neither; or named as a folder (ending in /, or
    one that exists), where one file is written: a file called so would be made, or fail."""
    text = str(path)
    folder = text.endswith(("/", os.sep)) or Path(text).is_dir()
    if folder or Path(text).suffix.lower() not in kind.suffixes:
        named = [s for s in kind.suffixes if s]
        named = " or ".join([", ".join(named[:-1]), named[-1]] if len(named) > 1 else named)
        shown = Path(text).name + ("/" if folder else "")
        raise refuse("S2N-OUTPUT-SUFFIX", None, name=shown, writes=kind.writes, named=named)


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


def make_folder(folder, output=None) -> None:
    """``folder`` made with its parents, for writing ``output`` (the folder itself by default);
    where it cannot be (no such place, no permission, a file of that name), a refusal naming
    ``output`` and why, not a traceback."""
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        why = exc.strerror or first_line(exc)
        if output is not None and Path(output) != folder:
            why = f"its folder {folder} cannot be made: {why}"
        raise refuse("S2N-OUTPUT-WRITE-FAILED", output if output is not None else folder, error=why) from exc


def _make_hidden_folder(folder: Path, output) -> None:
    """A temporary ``folder`` beside ``output`` made; where it cannot be, a refusal naming
    ``output`` with the system's reason (the hidden name is no business of the user's)."""
    try:
        folder.mkdir()
    except OSError as exc:
        raise refuse("S2N-OUTPUT-WRITE-FAILED", output, error=exc.strerror or first_line(exc)) from exc


def check_writable(path, output=None) -> None:
    """A file can be made at ``path`` (a temporary name, for writing ``output``): a refusal naming
    ``output`` and the system's reason where not, before a library says it in its own words (a
    GeoPackage's "unable to open database file", safetensors' "I/O error") or not at all."""
    path = Path(path)
    try:
        with open(path, "wb"):
            pass
    except OSError as exc:
        raise refuse("S2N-OUTPUT-WRITE-FAILED", output if output is not None else path,
                     error=exc.strerror or first_line(exc)) from exc
    _remove(path)


@contextlib.contextmanager
def atomic_path(path):
    """Yield a temporary path; on success rename it to ``path`` (a file with the permissions a
    plain open() gives, whatever wrote it), on any failure remove it. Temporary files that a
    killed run left beside ``path`` are removed first."""
    path = Path(path)
    if str(path.parent):
        make_folder(path.parent, path)
    remove_stale_siblings(path)
    tmp = temporary_sibling(path)
    check_writable(tmp, path)
    try:
        yield tmp
        check_written(tmp)
        if tmp.is_file():
            os.chmod(tmp, 0o666 & ~UMASK)  # safetensors writes 0600
        os.replace(tmp, path)
    except RasterioIOError as exc:  # an OSError too: GDAL's, reading an input or writing our file
        ours = is_write_error(exc, tmp)  # an error writing our file (disk full, ...), not reading an input
        text = write_error_text(exc, tmp)
        _remove_temporary(tmp)
        if ours:
            raise refuse("S2N-OUTPUT-WRITE-FAILED", path, error=text) from exc
        raise
    except OSError as exc:
        text = write_error_text(exc, tmp)
        _remove_temporary(tmp)
        raise refuse("S2N-OUTPUT-WRITE-FAILED", path, error=text) from exc
    except Exception as exc:
        full = disk_full(tmp, exc)  # a library's own error for a full disk (safetensors, SQLite, PNG, torch)
        _remove_temporary(tmp)
        if full:
            raise refuse("S2N-OUTPUT-WRITE-FAILED", path, error=os.strerror(errno.ENOSPC)) from exc
        raise
    except BaseException:
        _remove_temporary(tmp)
        raise


class UnfinishedOutput(OSError):
    """A file written without an error raised that does not read back whole (GDAL logs most write
    errors, a full disk among them, and closes the file as if nothing happened)."""


def check_written(tmp: Path) -> None:
    """UnfinishedOutput unless what was written at ``tmp`` reads back: a file that is not empty
    (a folder: each of its files) and, for a GeoTIFF, one whose directory opens and whose every
    block lies inside the file (GDAL's own index of offsets and sizes; nothing is decoded, so a
    full tile's mask is checked in a moment)."""
    files = sorted(p for p in tmp.rglob("*") if p.is_file()) if tmp.is_dir() else [tmp]
    for part in files:
        if not part.exists():
            continue  # a writer that made no file (nothing to rename) is not ours to judge
        size = part.stat().st_size
        if size == 0:
            raise UnfinishedOutput(f"{part.name} is empty")
        if part.suffix.lower() in (".tif", ".tiff"):
            _check_geotiff(part, size)


def _check_geotiff(path: Path, size: int) -> None:
    try:
        with rasterio.open(path) as src:
            for band in range(1, src.count + 1):
                rows = -(-src.height // src.block_shapes[band - 1][0])
                cols = -(-src.width // src.block_shapes[band - 1][1])
                for y in range(rows):
                    for x in range(cols):
                        offset = src.get_tag_item(f"BLOCK_OFFSET_{x}_{y}", "TIFF", bidx=band)
                        length = src.get_tag_item(f"BLOCK_SIZE_{x}_{y}", "TIFF", bidx=band)
                        if offset is None or length is None:  # a block never written: read as nodata
                            continue
                        if int(offset) + int(length) > size:
                            raise UnfinishedOutput(f"{path.name} ends before its block {x}, {y}")
    except RasterioIOError as exc:
        raise UnfinishedOutput(f"{path.name} does not open ({first_line(exc)})") from exc


def is_write_error(exc: BaseException, tmp: Path) -> bool:
    """Whether GDAL's ``exc`` came from writing ``tmp`` (not from reading an input): it names the
    file, says a write failed, or the file system ``tmp`` is on has no room left."""
    text = str(exc)
    return tmp.name in text or "Write failed" in text or "write error" in text.lower() or disk_full(tmp, exc)


FULL_BELOW = 1 << 20  # bytes free under which a file system counts as full (SQLite stops a page or more short)
_FULL_WORDS = re.compile(r"no space left|disk is full|disk full|not enough space", re.IGNORECASE)


def disk_full(path: Path, exc: BaseException | None = None) -> bool:
    """Whether the file system ``path`` (or its folder) is on is full: under FULL_BELOW bytes
    left for a user, or ``exc`` says so (ENOSPC, "database or disk is full", ...)."""
    if exc is not None and (getattr(exc, "errno", None) == errno.ENOSPC or _FULL_WORDS.search(str(exc))):
        return True
    if exc is not None and _said_why(exc):  # another reason, said: a pseudo file system such as /proc
        return False  # has no bytes free, and writing there fails for that reason, not for room
    folder = path if path.is_dir() else path.parent
    try:
        info = os.statvfs(folder)
    except OSError:
        return False
    return info.f_blocks > 0 and info.f_bavail * info.f_frsize < FULL_BELOW  # no blocks at all: /proc, not full


_OTHER_REASONS = tuple(os.strerror(e) for e in (errno.ENOENT, errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOTDIR,
                                                 errno.EISDIR, errno.EEXIST))


def _said_why(exc: BaseException) -> bool:
    """Whether ``exc`` says a reason a write failed other than room: its errno (Python's), or
    the system's words for it in GDAL's message (which carries no errno)."""
    if isinstance(exc, OSError) and not isinstance(exc, RasterioIOError) and exc.errno is not None:
        return exc.errno != errno.ENOSPC  # (GDAL's errors carry its own error numbers, not the system's)
    return any(reason in str(exc) for reason in _OTHER_REASONS)


def write_error_text(exc: BaseException, tmp: Path) -> str:
    """What to say of a failed write of ``tmp``: "No space left on device" when that is why,
    whatever the error said; else the error's first line, without the temporary name."""
    if disk_full(tmp, exc):
        return os.strerror(errno.ENOSPC)
    if isinstance(exc, RasterioIOError):  # GDAL's message names the temporary file: the system's words alone
        reason = next((r for r in _OTHER_REASONS if r in str(exc)), None)
        if reason:
            return reason
    text = getattr(exc, "strerror", None) if isinstance(exc, OSError) and not isinstance(exc, RasterioIOError) else None
    return (text or first_line(exc)).replace(str(tmp), tmp.name)


@contextlib.contextmanager
def atomic_file_set(path):
    """As atomic_path, for formats written as several files that share a stem (a shapefile's
    .shp, .shx, .dbf, .prj, .cpg): yield a path of that name in a hidden temporary folder
    beside ``path``; on success move each of its files beside ``path``, ``path`` itself last,
    so the file a reader opens appears only once its companions are there."""
    path = Path(path)
    if str(path.parent):
        make_folder(path.parent, path)
    remove_stale_siblings(path)
    folder = temporary_sibling(path).with_suffix("")
    _make_hidden_folder(folder, path)
    try:
        with _write_failures(path, folder):
            yield folder / path.name
            check_written(folder)
            for part in sorted(folder.iterdir(), key=lambda p: p.name == path.name):
                os.chmod(part, 0o666 & ~UMASK)
                os.replace(part, path.with_name(part.name))
    finally:
        _remove(folder)


@contextlib.contextmanager
def staged_folder(folder, names: tuple[str, ...], overwrite: bool):
    """Yield a hidden folder inside ``folder`` to write a set of outputs in (``names``: the files
    and folders a run makes there); on success remove what a run made before (``overwrite``) and
    move the new ones into place, the last of ``names`` last (the index a reader opens); on any
    failure remove the staged folder, leaving ``folder`` as it was, and report a write error."""
    folder = Path(folder)
    made = [p for p in (folder, *folder.parents) if not p.exists()]  # what a failure takes away again
    make_folder(folder)
    remove_stale_siblings(folder / "staged")
    stage = temporary_sibling(folder / "staged")
    _make_hidden_folder(stage, folder)
    done = False
    try:
        with _write_failures(folder, stage):
            yield stage
            written = [name for name in names if (stage / name).exists()]
            if overwrite:
                for name in names:
                    _remove(folder / name)
            for name in written:
                os.replace(stage / name, folder / name)
            done = True
    finally:
        _remove(stage)
        for path in [] if done else made:  # the folders this run made are not left behind, empty, by its failure
            if any(path.iterdir()):
                break
            path.rmdir()


@contextlib.contextmanager
def _write_failures(path: Path, written: Path):
    """A failure while ``written`` is made for the output ``path``, said as one write failure:
    an OSError by its own words, another error when the disk is full (a library's own error:
    SQLite's, torch's); a refusal already said (of the one file that failed) passes as it is."""
    try:
        yield
    except S2S2NetError:
        raise
    except OSError as exc:
        raise refuse("S2N-OUTPUT-WRITE-FAILED", path, error=write_error_text(exc, written)) from exc
    except Exception as exc:
        if disk_full(written, exc):
            raise refuse("S2N-OUTPUT-WRITE-FAILED", path, error=os.strerror(errno.ENOSPC)) from exc
        raise


def _remove_temporary(tmp: Path) -> None:
    """``tmp`` removed, with the files its writer made beside it under its name (SQLite's
    ``-journal``, ``-wal`` and ``-shm`` of a GeoPackage: GDAL 3.7's left its journal on a full
    disk)."""
    _remove(tmp)
    for sidecar in tmp.parent.glob(glob.escape(tmp.name) + "?*"):
        _remove(sidecar)


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
