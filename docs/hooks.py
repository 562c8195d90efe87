"""mkdocs hooks: pages made from the code and the repository when the site is built (the
rulebook's checks, the changelog), so that they cannot drift from what they list."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def on_page_markdown(markdown: str, page, config, files) -> str:
    if "<!-- checks -->" in markdown:
        markdown = markdown.replace("<!-- checks -->", _checks_table())
    if "<!-- changelog -->" in markdown:
        changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
        markdown = markdown.replace("<!-- changelog -->", changelog.split("\n", 1)[1])
    return markdown


def _checks_table() -> str:
    from s2s2net_cli.rulebook import rules_table

    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("<", "&lt;")

    rows = ["| code | severity | message (command line) | settled by (CLI / Python) |", "|---|---|---|---|"]
    for r in rules_table():
        settled = " / ".join(filter(None, [", ".join(f"`{o}`" for o in r["cli"]),
                                           ", ".join(f"`{o}`" for o in r["python"])]))
        rows.append(f"| `{r['code']}` | {r['severity']} | {cell(r['message'])} | {settled} |")
    return "\n".join(rows)
