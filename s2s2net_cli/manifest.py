"""Image/mask pairs from ``--pair`` options or a manifest CSV (shared by chip, evaluate, compare)."""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path

from .formats import header_said, is_remote, read_csv, source_file, source_key, source_stem
from .io import atomic_path
from .rulebook import Phrase, option, refuse


@dataclass(frozen=True)
class Pair:
    image: Path | str  # a stack, product or STAC item; a string when it is a URL or GDAL path
    mask: Path | str  # a raster or vector file; a string when it is a URL or GDAL path
    id: str
    split: str | None = None
    row: str = field(default="", compare=False)  # "line N of MANIFEST", where a manifest lists it


def pairs_from_options(pairs: list[tuple[str, str]] | None, manifests=()) -> list[Pair]:
    """Pairs given as ``--pair SCENE MASK`` and/or read from ``--manifest FILE`` (one or more
    manifests: a path or a sequence of paths); files must exist."""
    out = [Pair(_image(i), _image(m), source_stem(i)) for i, m in (pairs or [])]
    if isinstance(manifests, (str, Path)):
        manifests = [manifests]
    for manifest in manifests or ():
        out.extend(read_manifest(manifest))
    for p in out:
        for f in (p.image, p.mask):
            if not is_remote(f) and not Path(source_file(f)).exists():  # an item: its collection's file
                where = (f" ({p.row}, whose paths are read from its own folder)" if p.row else "")
                raise refuse("S2N-MANIFEST-FILE-MISSING", f, where=where)
    check_each_pair_once(out)
    ids = [p.id for p in out]
    dup = {i for i in ids if ids.count(i) > 1}
    if dup:
        where = ", ".join(map(str, manifests or ())) or option("pair")
        twice = [str(p.image) for p in out if p.id == sorted(dup)[0]]
        fix = "give each an id in an id column" if manifests else Phrase("list them in a {o.manifest} with an id column")
        raise refuse("S2N-MANIFEST-ID-TWICE", where, scene_id=sorted(dup)[0], first=twice[0], second=twice[1], fix=fix)
    return out


def read_manifest(path) -> list[Pair]:
    """A CSV with columns image,mask (optional id, split; scene for image, as a dates table and
    the commands name it); paths relative to the CSV."""
    path = Path(path)
    try:
        columns, rows = read_csv(path)
    except FileNotFoundError as exc:
        raise refuse("S2N-MANIFEST-NOT-FOUND", path) from exc
    except (UnicodeDecodeError, csv.Error) as exc:
        raise refuse("S2N-MANIFEST-UNREADABLE", path, error=exc) from exc
    if "image" not in columns and "scene" in columns:
        rows = [{"image": row.pop("scene"), **row} for row in rows]
        columns = ["image" if c == "scene" else c for c in columns]
    missing = {"image", "mask"} - set(columns)
    if missing:
        raise refuse("S2N-MANIFEST-COLUMNS", path, missing=', '.join(sorted(missing)), header=header_said(path))
    if not rows:
        raise refuse("S2N-MANIFEST-EMPTY", path)
    base = path.parent
    pairs = []
    for n, row in enumerate(rows, start=2):
        image, mask = (row.get("image") or "").strip(), (row.get("mask") or "").strip()
        if not image or not mask:
            raise refuse("S2N-MANIFEST-EMPTY-CELL", path, n=n)
        split = (row.get("split") or "").strip() or None
        if split not in (None, "train", "val", "test"):
            raise refuse("S2N-MANIFEST-SPLIT", path, n=n, split=split)
        pairs.append(Pair(_image(image, base), _image(mask, base), (row.get("id") or "").strip() or source_stem(image), split,
                          row=f"line {n} of {path}"))
    return pairs


def _image(text: str, base: Path | None = None) -> Path | str:
    """A scene's or mask's path relative to ``base``; URLs and GDAL paths stay strings, as GDAL
    takes them."""
    if is_remote(text):
        return text
    return base / text if base is not None else Path(text)


def write_manifest(path, rows: list[dict], overwrite: bool = False) -> None:
    columns = list(rows[0]) if rows else ["image", "mask", "id"]
    with atomic_path(path) as tmp:
        with open(tmp, "w", newline="", encoding="utf-8") as fh:
            writer = csv.DictWriter(fh, fieldnames=columns)
            writer.writeheader()
            writer.writerows(rows)


def check_each_pair_once(pairs: list[Pair]) -> None:
    """InputError when one scene and mask are given twice (by any paths to them, in --pair or a
    manifest): the pair would be scored, chipped or calibrated twice and weigh twice in what is
    pooled. Under two ids it passed the id check."""
    seen: dict[tuple[str, str], Pair] = {}
    for pair in pairs:
        found = seen.setdefault((source_key(pair.image), source_key(pair.mask)), pair)
        if found is not pair:
            raise refuse("S2N-PAIR-TWICE", pair.image, mask=pair.mask, first=found.row or option("pair"),
                         second=pair.row or option("pair"))
