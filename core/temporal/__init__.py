"""A Location's tools on Temporal workers: activities, and the workflow-side call.

Needs the ``temporal`` extra (``pip install 'pegboard[temporal]'``). See docs/temporal.md.
"""

from __future__ import annotations

from temporalio import workflow

# A workflow file is imported again inside Temporal's sandbox for each
# workflow run, and so is every module it imports, unless passed through.
# pegboard's modules are passed through: they are deterministic and keep no
# per-workflow state, and a fresh copy would import attrs, whose import asks
# the platform module what it runs on, which the sandbox forbids. Every
# module behind a public name is loaded here (through the import statement,
# which the sandbox watches), so that `pegboard.ToolCall`, `pegboard.Location`
# and the rest, read lazily later in a workflow file, find theirs already
# passed through; so are jsonschema-rs, which `pegboard.load_outcome` imports
# when first called, and jsonschema, which it imports to explain a form it refuses.
with workflow.unsafe.imports_passed_through():
    import jsonschema
    import jsonschema.exceptions  # noqa: F401
    import jsonschema_rs  # noqa: F401

    import pegboard

    for _home in sorted(set(pegboard._HOMES.values())):
        __import__(_home if not _home.startswith(".") else f"pegboard{_home}")
    del _home

    from ._activities import ACTIVITY, ToolActivities
    from ._payload import call_payload, load_call
    from ._workflow import execute_tool

__all__ = ("ACTIVITY", "ToolActivities", "call_payload", "execute_tool", "load_call")
