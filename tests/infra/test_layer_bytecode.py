"""The layer's bytecode is compiled by a CPython 3.12 that runs, or not shipped: a
``python3.12`` that exists but does not run (a pyenv shim) never stops the build."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from asyncz_cdk.layer_build import _compile_bytecode, _python312
from tests.support.shims import broken_python312

pytestmark = pytest.mark.infra

THIS_IS_312 = sys.version_info[:2] == (3, 12) and sys.implementation.name == "cpython"


@pytest.fixture
def site(tmp_path: Path) -> Path:
    (tmp_path / "python" / "pkg").mkdir(parents=True)
    (tmp_path / "python" / "pkg" / "__init__.py").write_text("VALUE = 1\n")
    return tmp_path / "python"


@pytest.fixture
def shim_first_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    shim = broken_python312(tmp_path / "shims")
    monkeypatch.setenv("PATH", f"{shim.parent}:{sys.exec_prefix}/bin:/usr/bin:/bin")
    return shim


def test_a_python312_that_does_not_run_is_passed_over(shim_first_on_path: Path) -> None:
    assert _python312(("python3.12",)) is None
    found = _python312(("python3.12", sys.executable))
    assert found == (sys.executable if THIS_IS_312 else None)


def test_without_a_python312_that_runs_the_layer_ships_without_bytecode(
    shim_first_on_path: Path, site: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _compile_bytecode(site, ("python3.12",)) is False
    assert "shipping without bytecode" in capsys.readouterr().err
    assert not list(site.rglob("*.pyc"))


def test_a_python_that_is_not_312_is_not_used_for_bytecode(tmp_path: Path, site: Path) -> None:
    other = tmp_path / "python3.11"
    other.write_text("#!/bin/sh\necho cpython False\n")
    other.chmod(0o755)
    assert _python312((str(other),)) is None
    assert _compile_bytecode(site, (str(other),)) is False


def test_a_python312_whose_compile_fails_leaves_no_half_compiled_tree(
    tmp_path: Path, site: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Answers the probe as a 3.12, then fails compileall after writing one .pyc.
    fake = tmp_path / "python3.12"
    fake.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = "-c" ]; then echo cpython True; exit 0; fi\n'
        'for last; do :; done; mkdir -p "$last/pkg/__pycache__"\n'
        'touch "$last/pkg/__pycache__/x.pyc"; echo "no space left" >&2; exit 1\n'
    )
    fake.chmod(0o755)
    assert _compile_bytecode(site, (str(fake),)) is False
    assert "no space left" in capsys.readouterr().err
    assert not list(site.rglob("__pycache__"))


@pytest.mark.skipif(not THIS_IS_312, reason="needs CPython 3.12 to compile")
def test_the_runtime_python_compiles_hash_checked_bytecode(site: Path) -> None:
    assert _compile_bytecode(site, (sys.executable,)) is True
    (pyc,) = site.rglob("*.pyc")
    assert int.from_bytes(pyc.read_bytes()[4:8], "little") == 1  # unchecked-hash
