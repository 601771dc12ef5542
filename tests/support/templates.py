"""Small readers over synthesized CloudFormation templates."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

Template = dict[str, Any]

# handler module -> the name Settings.require_for() knows the function by
FUNCTION_BY_HANDLER = {
    "asyncz.api.handler.handler": "api",
    "asyncz.worker.handler.handler": "worker",
    "asyncz.fleet.handler.handler": "fleet",
    "asyncz.recovery.handler.handler": "recovery",
    "asyncz.migrate.handler.handler": "migrate",
    "asyncz.outbox.handler.handler": "events",
}


def resources(template: Template, type_: str) -> dict[str, dict[str, Any]]:
    """Logical id -> resource, for every resource of ``type_``."""
    return {k: r for k, r in template["Resources"].items() if r["Type"] == type_}


def asyncz_functions(template: Template) -> dict[str, tuple[str, dict[str, Any]]]:
    """``api``/``worker``/... -> (logical id, resource) for our own Lambda functions."""
    found = {}
    for logical_id, fn in resources(template, "AWS::Lambda::Function").items():
        name = FUNCTION_BY_HANDLER.get(fn["Properties"].get("Handler", ""))
        if name:
            found[name] = (logical_id, fn)
    return found


def environment(fn: dict[str, Any]) -> dict[str, Any]:
    return dict(fn["Properties"].get("Environment", {}).get("Variables", {}))


def placeholder(key: str, value: Any) -> str:
    """A string for a template value; CloudFormation tokens become a marker."""
    return value if isinstance(value, str) else f"<token:{key}>"


def role_of(fn: dict[str, Any]) -> str:
    return str(fn["Properties"]["Role"]["Fn::GetAtt"][0])


def statements_of_role(template: Template, role_id: str) -> list[dict[str, Any]]:
    """Every statement of the inline policies (AWS::IAM::Policy) attached to ``role_id``."""
    out: list[dict[str, Any]] = []
    for policy in resources(template, "AWS::IAM::Policy").values():
        if {"Ref": role_id} in policy["Properties"].get("Roles", []):
            out += policy["Properties"]["PolicyDocument"]["Statement"]
    role = template["Resources"][role_id]
    for inline in role["Properties"].get("Policies", []):
        out += inline["PolicyDocument"]["Statement"]
    return out


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def actions(statement: dict[str, Any]) -> list[str]:
    return [str(a) for a in as_list(statement.get("Action", []))]


def mentions(value: Any, needle: str) -> bool:
    """Whether ``needle`` appears anywhere in the JSON of ``value``."""
    return needle in json.dumps(value)


def export_target(data: Template, service_value: Any) -> Any:
    """What a service-stack ``Fn::ImportValue`` resolves to in the data stack's outputs."""
    name = service_value["Fn::ImportValue"]
    for output in data.get("Outputs", {}).values():
        if output.get("Export", {}).get("Name") == name:
            return output["Value"]
    raise KeyError(f"no data-stack export named {name}")


def asset_dir(outdir: Path, artifact_id: str, code: dict[str, Any]) -> Path:
    """The staged folder of a function's or layer's S3 code asset."""
    key = code["S3Key"]
    files = json.loads((outdir / f"{artifact_id}.assets.json").read_text())["files"]
    (source,) = [f["source"]["path"] for h, f in files.items() if key.startswith(h)]
    return outdir / source
