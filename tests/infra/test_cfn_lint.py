"""cfn-lint finds no errors in any synthesized template."""

from __future__ import annotations

import pytest

from tests.support.cfn_lint import cfn_lint, errors
from tests.support.synth import Synth

pytestmark = pytest.mark.infra


def test_cfn_lint_has_no_errors(aws: Synth, local: Synth) -> None:
    result = cfn_lint(aws, local)
    assert not errors(result), result.stdout + result.stderr
    if result.stdout:
        print(result.stdout)
