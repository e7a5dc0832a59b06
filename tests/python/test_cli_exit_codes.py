"""`baton`'s exit codes as the README promises them: 0 for --help and --version, 2 for anything the
command line parser refuses (an unknown subcommand or flag, a value of the wrong type, a missing
subcommand), with the reason on stderr."""

from __future__ import annotations

import re

import pytest


@pytest.mark.engine
def test_version_and_help_exit_zero(run_baton):
    version = run_baton("--version")
    assert re.fullmatch(r"baton \d+\.\d+\.\d+\n", version.stdout), version.stdout
    assert run_baton("serve", "--help").stdout.startswith("Start the scheduler")


@pytest.mark.engine
@pytest.mark.parametrize("args, says", [
    ((), "A subcommand is required"),
    (("no-such-command",), "no-such-command"),
    (("serve", "--port", "not-a-port"), "--port"),
    (("serve", "--port", "70000"), "--port"),
    (("generate", "--no-such-flag"), "--no-such-flag"),
    (("bench", "--seed", "-1x"), "--seed"),
])
def test_parse_errors_exit_two_and_say_why(run_baton, args, says):
    proc = run_baton(*args, check=False)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert says in proc.stderr, proc.stderr
