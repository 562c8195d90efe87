"""``s2s2net checks``: every check the tool makes, from the rulebook."""

from __future__ import annotations

import json

import click

from ..rulebook import finding, rules_table
from .options import bad_parameter


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the rules as JSON on stdout.")
@click.option("--severity", type=click.Choice(["warning", "error"]), default=None, help="Only warnings, or only errors.")
@click.argument("codes", nargs=-1)
def checks(as_json, severity, codes):
    """List every warning and refusal s2s2net can give: its code, severity, message and the
    options that settle it (on the command line and in Python). Give CODES to show only those.

    \b
    Examples:
      s2s2net checks
      s2s2net checks --severity warning
      s2s2net checks S2N-OFFSET-MISSING --json
    """
    rules = [r for r in rules_table() if (severity is None or r["severity"] == severity)
             and (not codes or r["code"] in {c.upper() for c in codes})]
    unknown = sorted({c.upper() for c in codes} - {r["code"] for r in rules_table()})
    if unknown:
        raise bad_parameter(finding("S2N-CHECK-UNKNOWN", name=unknown[0]), hint="CODES")
    if as_json:
        click.echo(json.dumps(rules, indent=2))
        return
    for r in rules:  # plain lines on stdout, to read or to grep
        settled = f"  (settled by {', '.join(r['cli'])})" if r["cli"] else ""
        click.echo(f"{r['code']}  {r['severity']}: {r['message']}{settled}")
