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
    options that settle it (on the command line and in Python). Give CODES to show only those:
    a code, or part of one (WORLD, offset), shows every rule whose code holds it.

    \b
    Examples:
      s2s2net checks
      s2s2net checks --severity warning
      s2s2net checks S2N-OFFSET-MISSING --json
      s2s2net checks vector
    """
    wanted = [c.strip().upper() for c in codes]
    every = [r["code"] for r in rules_table()]
    unknown = [w for w in wanted if not any(w in code for code in every)]
    if unknown:
        raise bad_parameter(finding("S2N-CHECK-UNKNOWN", name=unknown[0]), hint="CODES")
    rules = [r for r in rules_table() if (severity is None or r["severity"] == severity)
             and (not wanted or any(w in r["code"] for w in wanted))]
    if as_json:
        click.echo(json.dumps(rules, indent=2))
        return
    for r in rules:  # plain lines on stdout, to read or to grep
        settled = f"  (settled by {', '.join(r['cli'])})" if r["cli"] else ""
        click.echo(f"{r['code']}  {r['severity']}: {r['message']}{settled}")
