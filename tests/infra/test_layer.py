"""The dependency layer: binary wheels for the configured architecture and CPython 3.12."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from asyncz_cdk.config import local_stage
from asyncz_cdk.layer_build import RUNTIME_REQUIREMENTS, cached_layer
from infra.app import BUILD_DIR, ROOT
from tests.support.synth import Synth, synthesize
from tests.support.templates import asset_dir, asyncz_functions, resources

pytestmark = pytest.mark.infra

LAMBDA_UNZIPPED_LIMIT = 262_144_000  # bytes, function code plus all layers
WHEEL_ARCH = {"x86_64": "x86_64", "arm64": "aarch64"}
ELF_MACHINE = {"x86_64": 0x3E, "arm64": 0xB7}


@pytest.fixture(scope="module", params=["x86_64", "arm64"])
def layer(request: pytest.FixtureRequest) -> tuple[str, Path]:
    arch: str = request.param
    return arch, cached_layer([RUNTIME_REQUIREMENTS], arch, BUILD_DIR) / "python"


def wheel_tags(site: Path) -> dict[str, list[str]]:
    tags: dict[str, list[str]] = {}
    for wheel in site.glob("*.dist-info/WHEEL"):
        tags[wheel.parent.name] = [
            line.split(":", 1)[1].strip()
            for line in wheel.read_text().splitlines()
            if line.startswith("Tag:")
        ]
    return tags


def test_wheel_tags_match_architecture_and_python(layer: tuple[str, Path]) -> None:
    arch, site = layer
    tags = wheel_tags(site)
    assert len(tags) >= 10, "the layer looks empty"
    binary = 0
    for dist, dist_tags in tags.items():
        assert dist_tags, f"{dist} has no Tag lines"
        for tag in dist_tags:
            python, abi, platform = tag.split("-")
            if platform == "any":
                continue
            binary += 1
            assert python == "cp312", f"{dist}: {tag} is not for CPython 3.12"
            assert abi in ("cp312", "abi3"), f"{dist}: {tag}"
            assert platform.startswith("manylinux"), f"{dist}: {tag}"
            assert platform.endswith("_" + WHEEL_ARCH[arch]), f"{dist}: {tag} is not {arch}"
    assert binary, "expected binary wheels (psycopg-binary, pydantic-core)"


def test_native_libraries_are_built_for_the_architecture(layer: tuple[str, Path]) -> None:
    arch, site = layer
    libraries = [p for p in site.rglob("*.so*") if p.is_file()]
    assert libraries
    for library in libraries:
        header = library.read_bytes()[:20]
        assert header[:4] == b"\x7fELF", library
        assert int.from_bytes(header[18:20], "little") == ELF_MACHINE[arch], library


def test_layer_fits_lambda_and_has_no_runtime_duplicates(layer: tuple[str, Path]) -> None:
    _, site = layer
    layer_bytes = sum(p.stat().st_size for p in site.rglob("*") if p.is_file())
    code_bytes = sum(p.stat().st_size for p in (ROOT / "functions").rglob("*.py"))
    print(f"layer {layer_bytes / 1e6:.1f} MB + code {code_bytes / 1e6:.2f} MB unzipped")
    assert layer_bytes + code_bytes < LAMBDA_UNZIPPED_LIMIT
    for name in ("boto3", "botocore", "s3transfer"):
        assert not (site / name).exists(), f"{name} is in the runtime; do not ship it"
    # Bytecode is shipped only as the runtime's own: CPython 3.12, hash-checked (no mtimes).
    pycs = list(site.rglob("*.pyc"))
    assert pycs, "the layer ships compiled bytecode (cold start)"
    assert all(p.name.endswith(".cpython-312.pyc") for p in pycs), "bytecode for 3.12 only"
    flags = {int.from_bytes(p.read_bytes()[4:8], "little") for p in pycs[:200]}
    assert flags == {1}, "pyc invalidation: unchecked hash (CDK asset copies change mtimes)"
    for module in (
        "psycopg",
        "psycopg_pool",
        "redis",
        "pydantic",
        "pydantic_settings",
        "aws_lambda_powertools",
        "aws_xray_sdk",
        "fastapi",
        "mangum",
        "croniter",
        "fastapi_swagger",
    ):
        assert (site / module).is_dir(), f"{module} missing from the layer"


def test_build_script_rejects_unknown_architecture() -> None:
    result = subprocess.run([str(ROOT / "layers" / "build.sh"), "sparc"], capture_output=True)
    assert result.returncode == 2


def test_arm64_stage_uses_the_arm64_layer(tmp_path_factory: pytest.TempPathFactory) -> None:
    config = local_stage(overrides={"architecture": "arm64", "alarm_email": "ops@example.com"})
    synth: Synth = synthesize(config, tmp_path_factory.mktemp("cdk-arm64"))
    (layer_id,) = resources(synth.service, "AWS::Lambda::LayerVersion")
    assert synth.service["Resources"][layer_id]["Properties"]["CompatibleArchitectures"] == [
        "arm64"
    ]
    for _, fn in asyncz_functions(synth.service).values():
        assert fn["Properties"]["Architectures"] == ["arm64"]
    # ...and the optional alarm e-mail subscription appears when configured.
    (subscription,) = resources(synth.service, "AWS::SNS::Subscription").values()
    assert subscription["Properties"] == {
        "Endpoint": "ops@example.com",
        "Protocol": "email",
        "TopicArn": subscription["Properties"]["TopicArn"],
    }


def test_lean_and_serverless_run_on_arm64_with_a_layer_of_aarch64_wheels(
    iam_profile: Synth,
) -> None:
    assert iam_profile.config.architecture == "arm64"  # Graviton: 20% less per GB-second
    for _, fn in asyncz_functions(iam_profile.service).values():
        assert fn["Properties"]["Architectures"] == ["arm64"]
    ((_, layer),) = resources(iam_profile.service, "AWS::Lambda::LayerVersion").items()
    assert layer["Properties"]["CompatibleArchitectures"] == ["arm64"]
    # the folder the template's layer asset is made of: its wheels' tags say aarch64
    artifact = iam_profile.artifacts[f"{iam_profile.name}-Service"]
    site = asset_dir(iam_profile.outdir, artifact, layer["Properties"]["Content"]) / "python"
    platforms = {tag.split("-")[2] for tags in wheel_tags(site).values() for tag in tags}
    binary = platforms - {"any"}
    assert binary and all(p.endswith("_aarch64") for p in binary), binary


def test_arch_is_the_short_context_key_for_architecture() -> None:
    from aws_cdk import App

    from asyncz_cdk.context import settings_from_context

    for profile, arch in (("standard", "arm64"), ("lean", "x86_64")):
        app = App(context={"profile": profile, "arch": arch})
        assert settings_from_context(app).architecture == arch
