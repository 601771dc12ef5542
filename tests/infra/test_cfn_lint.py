"""cfn-lint finds no errors in any synthesized template."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.synth import Synth

pytestmark = pytest.mark.infra

# W3005 (redundant DependsOn) is emitted for CDK's own role/function pairs.
IGNORED = "W3005"


def test_cfn_lint_has_no_errors(aws: Synth, local: Synth) -> None:
    paths = [str(synth.template_path(name)) for synth in (aws, local) for name in synth.templates]
    cfn_lint = Path(sys.executable).with_name("cfn-lint")
    result = subprocess.run(
        [str(cfn_lint), *paths, "--ignore-checks", IGNORED, "--format", "parseable"],
        capture_output=True,
        text=True,
    )
    errors = [line for line in result.stdout.splitlines() if ":E" in line]
    # Exit status is a bit mask: 2 = errors, 4 = warnings, 8 = informational, 1 = crash.
    assert not errors and result.returncode & 3 == 0, result.stdout + result.stderr
    if result.stdout:
        print(result.stdout)
