"""pegboard: host LLM tools that third-party packages ship as plugins."""

from __future__ import annotations

# typing is not imported at run time: `pegboard --help` imports this module.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, MutableMapping
    from typing import Any

    from pegboard.hookspecs import hookimpl

    from ._bounding import OutputLimits
    from ._codec import AttrsCodec, Codec, SchemaCodec
    from ._config import ConfigError, permission_rules
    from ._content import (
        Audio,
        ContentAnnotations,
        ContentItem,
        EmbeddedResource,
        Image,
        ResourceLink,
        Text,
    )
    from ._deferral import ToolBudget
    from ._durable import dump_outcome, load_outcome
    from ._elicitation import Elicit, Elicitation, ElicitationAnswer
    from ._errors import (
        CodecError,
        PluginCrashed,
        RegistrationError,
        RetentionError,
        SchemaError,
        ToolFailure,
    )
    from ._filesystem import Filesystem, OutsideLocationError
    from ._host import Host
    from ._journal import CallJournal, JournalConflict, JournalEntry, SQLiteJournal
    from ._json import FrozenDict, FrozenList, thaw
    from ._location import Location, ToolChanges
    from ._outcome import CallIdentity, Completed, Failed, Outcome, ToolCall, ToolError
    from ._permissions import (
        Approver,
        PermissionRejected,
        PermissionRequest,
        PermissionRule,
        Permissions,
        Reject,
        SavedApproval,
    )
    from ._pipeline import ExecuteEvent
    from ._plugins import PluginError, PluginInfo
    from ._registry import Registration, Tools, effective_name
    from ._request import Request
    from ._secrets import Secrets
    from ._services import BackgroundTasks, LocationInfo, ServiceDenied, Services
    from ._step import StepEvent
    from ._storage import ManagedStorage
    from ._tool import (
        Progress,
        Tool,
        ToolAnnotations,
        ToolContext,
        ToolDefinition,
        ToolLog,
        ToolResponse,
        tool,
    )
    from ._tracing import trace_context
    from .sandbox import Confinement, Sandbox, SandboxInfo

__all__ = (
    "Approver",
    "AttrsCodec",
    "Audio",
    "BackgroundTasks",
    "CallIdentity",
    "CallJournal",
    "Codec",
    "CodecError",
    "Completed",
    "ConfigError",
    "Confinement",
    "ContentAnnotations",
    "ContentItem",
    "Elicit",
    "Elicitation",
    "ElicitationAnswer",
    "EmbeddedResource",
    "ExecuteEvent",
    "Failed",
    "Filesystem",
    "FrozenDict",
    "FrozenList",
    "Host",
    "Image",
    "JournalConflict",
    "JournalEntry",
    "Location",
    "LocationInfo",
    "ManagedStorage",
    "Outcome",
    "OutputLimits",
    "OutsideLocationError",
    "PermissionRejected",
    "PermissionRequest",
    "PermissionRule",
    "Permissions",
    "PluginCrashed",
    "PluginError",
    "PluginInfo",
    "Progress",
    "Registration",
    "RegistrationError",
    "Reject",
    "Request",
    "ResourceLink",
    "RetentionError",
    "SQLiteJournal",
    "Sandbox",
    "SandboxInfo",
    "SavedApproval",
    "SchemaCodec",
    "SchemaError",
    "Secrets",
    "ServiceDenied",
    "Services",
    "StepEvent",
    "Text",
    "Tool",
    "ToolAnnotations",
    "ToolBudget",
    "ToolCall",
    "ToolChanges",
    "ToolContext",
    "ToolDefinition",
    "ToolError",
    "ToolFailure",
    "ToolLog",
    "ToolResponse",
    "Tools",
    "dump_outcome",
    "effective_name",
    "hookimpl",
    "load_outcome",
    "permission_rules",
    "thaw",
    "tool",
    "trace_context",
)

# Each public name is imported from its module on first use (PEP 562): a
# program that needs one part, such as `pegboard --help`, does not pay for
# importing the whole library.
_HOMES = {
    "Approver": "._permissions",
    "AttrsCodec": "._codec",
    "Audio": "._content",
    "BackgroundTasks": "._services",
    "CallIdentity": "._outcome",
    "CallJournal": "._journal",
    "Codec": "._codec",
    "CodecError": "._errors",
    "Completed": "._outcome",
    "ConfigError": "._config",
    "Confinement": ".sandbox",
    "ContentAnnotations": "._content",
    "ContentItem": "._content",
    "Elicit": "._elicitation",
    "Elicitation": "._elicitation",
    "ElicitationAnswer": "._elicitation",
    "EmbeddedResource": "._content",
    "ExecuteEvent": "._pipeline",
    "Failed": "._outcome",
    "Filesystem": "._filesystem",
    "FrozenDict": "._json",
    "FrozenList": "._json",
    "Host": "._host",
    "Image": "._content",
    "JournalConflict": "._journal",
    "JournalEntry": "._journal",
    "Location": "._location",
    "LocationInfo": "._services",
    "ManagedStorage": "._storage",
    "Outcome": "._outcome",
    "OutputLimits": "._bounding",
    "OutsideLocationError": "._filesystem",
    "PermissionRejected": "._permissions",
    "PermissionRequest": "._permissions",
    "PermissionRule": "._permissions",
    "Permissions": "._permissions",
    "PluginCrashed": "._errors",
    "PluginError": "._plugins",
    "PluginInfo": "._plugins",
    "Progress": "._tool",
    "Registration": "._registry",
    "RegistrationError": "._errors",
    "Reject": "._permissions",
    "Request": "._request",
    "ResourceLink": "._content",
    "RetentionError": "._errors",
    "SQLiteJournal": "._journal",
    "Sandbox": ".sandbox",
    "SandboxInfo": ".sandbox",
    "Secrets": "._secrets",
    "StepEvent": "._step",
    "SavedApproval": "._permissions",
    "SchemaCodec": "._codec",
    "SchemaError": "._errors",
    "ServiceDenied": "._services",
    "Services": "._services",
    "Text": "._content",
    "Tool": "._tool",
    "ToolAnnotations": "._tool",
    "ToolBudget": "._deferral",
    "ToolCall": "._outcome",
    "ToolChanges": "._location",
    "ToolContext": "._tool",
    "ToolDefinition": "._tool",
    "ToolLog": "._tool",
    "ToolError": "._outcome",
    "ToolFailure": "._errors",
    "ToolResponse": "._tool",
    "Tools": "._registry",
    "dump_outcome": "._durable",
    "effective_name": "._registry",
    "hookimpl": "pegboard.hookspecs",
    "load_outcome": "._durable",
    "permission_rules": "._config",
    "thaw": "._json",
    "tool": "._tool",
    "trace_context": "._tracing",
}


def _exports(
    package: str,
    homes: Mapping[str, str],
    namespace: MutableMapping[str, Any],
    public: Iterable[str],
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``, whose names live in ``homes``.

    ``homes`` maps each name to the module (relative to ``package``) that defines
    it; a name read once is kept in ``namespace``, so later reads are ordinary.
    """

    def attribute(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        import importlib

        value = getattr(importlib.import_module(home, package), name)
        namespace[name] = value
        return value

    def listing() -> list[str]:
        return sorted({*namespace, *public})

    return attribute, listing


__getattr__, __dir__ = _exports(__name__, _HOMES, globals(), __all__)
