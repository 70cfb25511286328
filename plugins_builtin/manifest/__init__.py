"""The ``manifest`` plugin: tools declared in TOML files, each running one command.

A Location names its manifest files in ``pegboard.toml`` (``[manifest] files =
["tools.toml"]``); see docs/builtin.md. The commands run on this machine, so the
plugin needs the host's trust (``trusted=["manifest"]``) and every call asks the
permission service (action ``bash``, the command line as the resource; action
``network`` too for a tool that declares ``network = true``). Every command runs
in the Location's sandbox, like ``bash``.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pegboard

from ._manifest import ManifestError, ManifestTool, read_manifest
from ._run import response, run_command

__all__ = ("ManifestError", "activate_location", "options_schema", "tools_from")

#: The ``[manifest]`` options, checked by the host before activation.
options_schema: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "files": {
            "type": "array",
            "items": {"type": "string", "minLength": 1},
            "description": "manifest files, relative to the Location's root",
        },
    },
    "additionalProperties": False,
}


@pegboard.hookimpl
def activate_location(
    tools: pegboard.Tools, options: Mapping[str, Any], services: pegboard.Services
) -> None:
    """Register the tools of every manifest file; a broken file is reported, the rest load."""
    files = options.get("files", [])
    if files and not services.trusted:
        raise pegboard.ServiceDenied(
            "the manifest plugin runs the commands a Location's manifest files name, so it "
            "runs only when the host trusts it: host.location(trusted=['manifest']) or "
            "--trust manifest"
        )
    if not files:
        return
    filesystem: pegboard.Filesystem = services.filesystem
    for name in files:
        try:
            path = filesystem.resolve(name)
            made = tools_from(
                path,
                root=filesystem.root,
                permissions=services.permissions,
                sandbox=services.sandbox,
            )
            taken = sorted(set(made) & BUILTIN_TOOLS)
            if taken:
                raise ManifestError(
                    f"tool {taken[0]!r} has the name of a built-in tool, which it would "
                    "replace in this Location; rename it in the manifest"
                )
            tools.register(made)
        except (ManifestError, pegboard.OutsideLocationError) as error:
            services.report(f"manifest {name!r} is not loaded: {error}", phase="activation")
        except (pegboard.SchemaError, pegboard.RegistrationError) as error:
            services.report(f"manifest {name!r} is not loaded: {error}", phase="activation")


#: The built-in plugin's tools: a manifest may not take their names.
BUILTIN_TOOLS = frozenset({"bash", "edit", "glob", "grep", "read", "write"})


def tools_from(
    path: Path,
    *,
    root: Path,
    permissions: pegboard.Permissions,
    sandbox: pegboard.Sandbox | None = None,
) -> dict[str, pegboard.Tool]:
    """The tools a manifest file declares, by authored name, ready to register.

    A plugin package can ship a manifest and register its tools in its own
    ``activate_location``. Commands run in ``root`` under ``sandbox`` (pass
    ``services.sandbox``; by default a sandbox of its own in ``"auto"`` mode)
    and ask ``permissions`` before every call. Raises `ManifestError` or
    `pegboard.SchemaError`.
    """
    if sandbox is None:
        sandbox = pegboard.Sandbox("auto", root=root)
    made = {}
    for spec in read_manifest(path):
        try:
            made[spec.name] = _tool(spec, root, permissions, sandbox)
        except pegboard.SchemaError as error:
            raise pegboard.SchemaError(f"tool {spec.name!r}: {error}") from None
    return made


def _tool(
    spec: ManifestTool,
    root: Path,
    permissions: pegboard.Permissions,
    sandbox: pegboard.Sandbox,
) -> pegboard.Tool:
    line = shlex.join(spec.command)

    async def execute(input: Any, context: pegboard.ToolContext) -> Any:
        sandbox.require()
        missing = sandbox.missing
        metadata: dict[str, Any] = {"tool": spec.name, "command": line}
        if missing is not None:
            metadata["sandbox"] = missing
        await permissions.ask(
            pegboard.PermissionRequest(
                action="bash",
                resources=[line],
                # Unconfined, a command is asked every time: no rule or "always" covers it.
                opaque=[line] if missing is not None else [],
                always=[] if missing is not None else [line],
                metadata=metadata,
            )
        )
        if spec.network:
            await permissions.ask(
                pegboard.PermissionRequest(
                    action="network", resources=[line], always=[line], metadata=metadata
                )
            )
        data = json.dumps(pegboard.thaw(input)).encode()
        async with sandbox.call(network=spec.network) as confinement:
            finished = await run_command(
                spec.command, cwd=root, stdin=data, timeout=spec.timeout, confinement=confinement
            )
        if finished.status != 0:
            said = finished.stderr.decode("utf-8", "replace").strip() or "(nothing on stderr)"
            raise pegboard.ToolFailure(f"the command exited with status {finished.status}: {said}")
        return response(finished.stdout, has_output=spec.output is not None)

    return pegboard.tool(
        description=spec.description, execute=execute, input=spec.input, output=spec.output
    )
