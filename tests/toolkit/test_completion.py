"""Shell completion of the `qm2qm` command (click's `_QM2QM_COMPLETE`), as documented in the README."""
from __future__ import annotations

from click.testing import CliRunner

from qm2qm.cli import main


def complete(line: str) -> list[str]:
    words = line.split(" ")
    env = {"_QM2QM_COMPLETE": "bash_complete", "COMP_WORDS": line, "COMP_CWORD": str(len(words) - 1)}
    result = CliRunner().invoke(main, [], env=env, prog_name="qm2qm")
    assert result.exit_code == 0, result.output
    return [item.split(",", 1)[1] for item in result.output.splitlines()]


def test_bash_source_defines_the_completion_function():
    result = CliRunner().invoke(main, [], env={"_QM2QM_COMPLETE": "bash_source"}, prog_name="qm2qm")
    assert result.exit_code == 0
    assert "_qm2qm_completion()" in result.output and "complete -o nosort -F _qm2qm_completion qm2qm" in result.output


def test_commands_options_and_choices_complete():
    assert "serve" in complete("qm2qm se")
    assert complete("qm2qm serve --log-f") == ["--log-format"]
    assert complete("qm2qm serve --log-format ") == ["text", "json"]
