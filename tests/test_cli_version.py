"""`galfast --version`: the version of the installed build, without naming a command."""

from __future__ import annotations

import pytest

import galfast
from galfast.cli import main


def test_version_prints_the_build_version_and_exits_zero(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"galfast {galfast.__version__}"
