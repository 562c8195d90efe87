"""``python -m s2s2net_cli`` (what ``deepspeed --module s2s2net_cli`` runs)."""

from .cli.main import cli

if __name__ == "__main__":
    cli(prog_name="s2s2net")
