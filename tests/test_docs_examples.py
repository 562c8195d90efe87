"""The examples of the README and the docs that run on the bundled sample data run as written.

A fenced block is runnable when the line before it is ``<!-- runnable -->`` (an HTML comment:
the rendered page does not show it). Each runnable block runs in a fresh process, in a folder of
its own holding a copy of ``sample_data/`` (its outputs land there): a shell block by
``bash -euo pipefail`` with this environment's ``s2s2net`` first on PATH, a ``python`` block by
this interpreter, warnings from our own code made errors. It must exit 0, and every file or
folder it names after ``-o`` must exist afterwards."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RUNNABLE = re.compile(r"^<!-- runnable -->\n```(\w*)\n(.*?)^```", re.S | re.M)
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def runnable_blocks() -> list:
    return [pytest.param(lang, body, id=f"{page.relative_to(ROOT)}:{k}")
            for page in PAGES for k, (lang, body) in enumerate(RUNNABLE.findall(page.read_text()), start=1)]


def test_every_guide_with_commands_has_a_runnable_example():
    pages = {page.relative_to(ROOT).as_posix() for page in PAGES if RUNNABLE.search(page.read_text())}
    expected = {"README.md", "docs/getting-started.md"} | {f"docs/guides/{g}.md" for g in
                                                          ("predict", "batch", "rivers", "occurrence", "chips",
                                                           "training", "scoring")}
    assert expected <= pages, sorted(expected - pages)


@pytest.mark.slow
@pytest.mark.parametrize("lang,body", runnable_blocks())
def test_a_runnable_example_runs_as_written(tmp_path, lang, body):
    shutil.copytree(ROOT / "sample_data", tmp_path / "sample_data")
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    if lang == "python":
        cmd = [sys.executable, "-W", "error::UserWarning:s2s2net_cli", "-c", body]
    else:
        cmd = ["bash", "-euo", "pipefail", "-c", body]
    r = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, env=env, timeout=900)
    assert r.returncode == 0, f"{body}\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}"
    for name in re.findall(r"(?:^|\s)(?:-o|--output)\s+(\S+)", body):
        assert (tmp_path / name.strip("\"'")).exists(), f"{name} not written by:\n{body}"


# A section named in prose: `[page](other.md), "Title"`, or `(above, "Title")`, `below, "Title"`,
# `see "Title"` for the same page. The title is where a heading starts, or a paragraph's bold lead (`**Title.**`).
SECTION_REFERENCE = re.compile(r'(?:\]\(([^()\s]*?\.md)(?:#[^)]*)?\)|\b(?:above|below|see))[,:]?\s+"([^"]+)"')


def _sections(text: str) -> list[str]:
    headings = re.findall(r"^#+\s+(.*)$", text, re.M)
    bold_leads = re.findall(r"\*\*([^*]+)\*\*", text)
    return [" ".join(s.split()).lower() for s in headings + bold_leads]


def test_every_section_named_in_the_docs_is_there():
    """A reader told to look "above" or on another page for a section finds it under that name."""
    missing = []
    for page in PAGES:
        text = page.read_text()
        for match in SECTION_REFERENCE.finditer(text):
            link, title = match.groups()
            target = (page.parent / link).resolve() if link else page
            if not target.exists():
                missing.append(f"{page.relative_to(ROOT)}: {link} (no such page)")
                continue
            wanted = " ".join(title.split()).lower()
            if not any(section.startswith(wanted) for section in _sections(target.read_text())):
                line = text.count("\n", 0, match.start()) + 1
                missing.append(f'{page.relative_to(ROOT)}:{line}: "{title}" not a section of {target.name}')
    assert not missing, "\n".join(missing)
