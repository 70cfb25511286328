"""pegboard: host LLM tools that third-party packages ship as plugins."""

from pegboard.hookspecs import hookimpl

from ._bounding import OutputLimits
from ._codec import AttrsCodec, Codec, SchemaCodec
from ._config import ConfigError, permission_rules
from ._content import Audio, ContentItem, EmbeddedResource, Image, ResourceLink, Text
from ._durable import dump_outcome, load_outcome
from ._errors import CodecError, RegistrationError, RetentionError, SchemaError, ToolFailure
from ._filesystem import Filesystem, OutsideLocationError
from ._host import Host
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
from ._services import BackgroundTasks, LocationInfo, ServiceDenied, Services
from ._storage import ManagedStorage
from ._tool import (
    Progress,
    Tool,
    ToolAnnotations,
    ToolContext,
    ToolDefinition,
    ToolResponse,
    tool,
)

__all__ = (
    "Approver",
    "AttrsCodec",
    "Audio",
    "BackgroundTasks",
    "CallIdentity",
    "Codec",
    "CodecError",
    "Completed",
    "ConfigError",
    "ContentItem",
    "EmbeddedResource",
    "ExecuteEvent",
    "Failed",
    "Filesystem",
    "FrozenDict",
    "FrozenList",
    "Host",
    "Image",
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
    "PluginError",
    "PluginInfo",
    "Progress",
    "Registration",
    "RegistrationError",
    "Reject",
    "Request",
    "ResourceLink",
    "RetentionError",
    "SavedApproval",
    "SchemaCodec",
    "SchemaError",
    "ServiceDenied",
    "Services",
    "Text",
    "Tool",
    "ToolAnnotations",
    "ToolCall",
    "ToolChanges",
    "ToolContext",
    "ToolDefinition",
    "ToolError",
    "ToolFailure",
    "ToolResponse",
    "Tools",
    "dump_outcome",
    "effective_name",
    "hookimpl",
    "load_outcome",
    "permission_rules",
    "thaw",
    "tool",
)
