"""Every ASYNCZ_* variable the operator docs name is still read: by Settings, or by the
one module documented to read it outside them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from asyncz.settings import Settings

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
DOCS = ("docs/operate.md", "docs/deploy.md")
# Read outside Settings: the CLI's endpoint and key, tracing's switch, the local runner.
READ_ELSEWHERE = {
    "ASYNCZ_API_KEY": "functions/asyncz/cli/client.py",
    "ASYNCZ_API_URL": "functions/asyncz/cli/client.py",
    "ASYNCZ_TRACING": "functions/asyncz/tracing.py",
    "ASYNCZ_RECOVERY_INTERVAL_SECONDS": "functions/asyncz/local/config.py",
    "ASYNCZ_FLEET_INTERVAL_SECONDS": "functions/asyncz/local/config.py",
}


def _documented() -> set[str]:
    text = "".join((ROOT / doc).read_text() for doc in DOCS)
    return set(re.findall(r"ASYNCZ_[A-Z0-9_]*[A-Z0-9]", text))


def _sample(field: str) -> str:
    """A value the field accepts, as the environment spells it."""
    default = Settings.model_fields[field].default
    if isinstance(default, bool):
        return str(not default).lower()
    if default is None:
        return "x"
    return str(default)


def test_every_documented_setting_is_read_from_its_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fields = {f"ASYNCZ_{name.upper()}": name for name in Settings.model_fields}
    documented = _documented() - set(READ_ELSEWHERE)
    assert documented, "no ASYNCZ_* name found in the docs"
    unknown = sorted(documented - set(fields))
    assert not unknown, f"documented but not a setting: {unknown}"
    for variable in documented:
        monkeypatch.setenv(variable, _sample(fields[variable]))
    read = Settings()
    assert {fields[v] for v in documented} <= read.model_fields_set


def test_documented_variables_read_outside_settings_are_still_read() -> None:
    documented = _documented()
    for variable, module in READ_ELSEWHERE.items():
        if variable in documented:
            assert f'"{variable}"' in (ROOT / module).read_text(), (variable, module)
