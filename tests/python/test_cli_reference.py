"""docs/cli-flags.md is every `baton` subcommand's --help as the binary prints it: a flag added,
renamed or reworded without regenerating the page (scripts/cli_reference.py) fails here."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_flag_reference_matches_the_binary(baton_binary):
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "cli_reference.py"), "--baton", str(baton_binary),
                           "--check"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr


def test_the_cli_page_names_every_subcommand():
    page = (ROOT / "docs" / "cli.md").read_text()
    flags = (ROOT / "docs" / "cli-flags.md").read_text()
    commands = [line[len("## baton "):] for line in flags.splitlines() if line.startswith("## baton ")]
    assert commands, "docs/cli-flags.md lists no subcommand"
    missing = [c for c in commands if f"`baton {c}" not in page]
    assert not missing, f"docs/cli.md does not describe: {missing}"
