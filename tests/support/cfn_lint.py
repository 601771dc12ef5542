"""cfn-lint over synthesized templates, as the infra tests run it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.synth import Synth

# W3005 (redundant DependsOn) is emitted for CDK's own role/function pairs.
IGNORED = "W3005"


def cfn_lint(*synths: Synth) -> subprocess.CompletedProcess[str]:
    """cfn-lint's run over every template of ``synths``; :func:`errors` reads it."""
    paths = [str(synth.template_path(name)) for synth in synths for name in synth.templates]
    cfn_lint = Path(sys.executable).with_name("cfn-lint")
    return subprocess.run(
        [str(cfn_lint), *paths, "--ignore-checks", IGNORED, "--format", "parseable"],
        capture_output=True,
        text=True,
    )


def errors(result: subprocess.CompletedProcess[str]) -> list[str]:
    """The errors of a run, and a crash as one (exit status is a bit mask: 2 = errors,
    4 = warnings, 8 = informational, 1 = crash)."""
    found = [line for line in result.stdout.splitlines() if ":E" in line]
    if result.returncode & 3 and not found:
        found.append(f"cfn-lint exited {result.returncode}: {result.stderr[-2000:]}")
    return found
