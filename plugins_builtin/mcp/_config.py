"""The ``[mcp]`` options: timeouts and the servers to mount."""

from __future__ import annotations

import os
import string
from collections.abc import Mapping
from typing import Any

import attrs

import pegboard

__all__ = ("OPTIONS_SCHEMA", "ServerConfig", "server_configs")

#: Seconds a server may take to start and list its tools.
STARTUP_TIMEOUT = 30.0
#: Seconds one call (or one listing) may take.
REQUEST_TIMEOUT = 300.0
#: The least severe log message a server is asked to send (MCP's logging/setLevel).
LOG_LEVEL = "info"
#: MCP's log levels, least severe first (syslog's).
LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")

_SECONDS = {"type": "number", "exclusiveMinimum": 0}
_STRINGS = {"type": "object", "additionalProperties": {"type": "string"}}
_LOG_LEVEL = {"enum": list(LOG_LEVELS)}
_URL = {"type": "string", "pattern": "^https?://"}
_OAUTH = {
    "type": "object",
    "properties": {
        "client_id": {"type": "string", "minLength": 1},
        "client_secret": {"type": "string", "minLength": 1},
        "issuer": _URL,
    },
    "required": ["client_id", "client_secret", "issuer"],
    "additionalProperties": False,
}
_SERVER = {
    "type": "object",
    "properties": {
        "command": {"type": "array", "items": {"type": "string"}, "minItems": 1},
        "environment": _STRINGS,
        "url": _URL,
        "headers": _STRINGS,
        "oauth": _OAUTH,
        "disabled": {"type": "boolean"},
        "startup_timeout": _SECONDS,
        "request_timeout": _SECONDS,
        "log_level": _LOG_LEVEL,
    },
    "additionalProperties": False,
}
OPTIONS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "startup_timeout": _SECONDS,
        "request_timeout": _SECONDS,
        "log_level": _LOG_LEVEL,
        "servers": {"type": "object", "additionalProperties": _SERVER},
    },
    "additionalProperties": False,
}


@attrs.frozen(kw_only=True)
class OAuthClient:
    """OAuth client credentials (RFC 6749 section 4.4) for a remote server."""

    client_id: str
    client_secret: str = attrs.field(repr=False)
    #: The authorization server the credentials belong to: they are sent nowhere else.
    issuer: str


@attrs.frozen(kw_only=True)
class ServerConfig:
    """One server to mount: local (``command``) or remote (``url``)."""

    name: str
    command: tuple[str, ...] = ()
    environment: Mapping[str, str] = attrs.field(factory=dict)
    url: str | None = None
    headers: Mapping[str, str] = attrs.field(factory=dict, repr=False)
    oauth: OAuthClient | None = None
    startup_timeout: float = STARTUP_TIMEOUT
    request_timeout: float = REQUEST_TIMEOUT
    #: The least severe log message the server is asked to send.
    log_level: str = LOG_LEVEL


def server_configs(options: Mapping[str, Any]) -> tuple[list[ServerConfig], list[str]]:
    """The enabled servers in ``options`` (already schema-valid), and why others were skipped."""
    startup = float(options.get("startup_timeout", STARTUP_TIMEOUT))
    request = float(options.get("request_timeout", REQUEST_TIMEOUT))
    log_level = str(options.get("log_level", LOG_LEVEL))
    configs: list[ServerConfig] = []
    problems: list[str] = []
    for name, entry in options.get("servers", {}).items():
        if entry.get("disabled", False):
            continue
        problem = _problem(name, entry)
        try:
            environment = _expand(entry.get("environment", {}), "environment")
            headers = _expand(entry.get("headers", {}), "headers")
            oauth = _expand(entry.get("oauth", {}), "oauth")
        except ValueError as error:
            problem = problem or str(error)
        if problem is not None:
            problems.append(f"server {name!r}: {problem}; it is not mounted")
            continue
        configs.append(
            ServerConfig(
                name=name,
                command=tuple(entry.get("command", ())),
                environment=environment,
                url=entry.get("url"),
                headers=headers,
                oauth=OAuthClient(**oauth) if oauth else None,
                startup_timeout=float(entry.get("startup_timeout", startup)),
                request_timeout=float(entry.get("request_timeout", request)),
                log_level=str(entry.get("log_level", log_level)),
            )
        )
    return configs, problems


def _expand(values: Mapping[str, str], table: str) -> dict[str, str]:
    """``${NAME}`` in a value is the host's environment variable ``NAME`` (``$$`` is a
    dollar sign), so secrets stay out of the Location's config file.
    """
    expanded = {}
    for key, value in values.items():
        try:
            expanded[key] = string.Template(value).substitute(os.environ)
        except KeyError as missing:
            raise ValueError(
                f"{table}.{key} names ${{{missing.args[0]}}}, which is not set in the "
                "host's environment"
            ) from None
        except ValueError:
            raise ValueError(
                f"{table}.{key}: write ${{NAME}} for an environment variable and $$ for a "
                "dollar sign"
            ) from None
    return expanded


def _problem(name: str, entry: Mapping[str, Any]) -> str | None:
    local, remote = "command" in entry, "url" in entry
    if local == remote:
        return (
            "give either command = [...] (a local server) or url = '...' (a remote one)"
            if not local
            else "give command or url, not both"
        )
    if local and ("headers" in entry or "oauth" in entry):
        return "headers and oauth apply to a remote server (url); a local one takes environment"
    if remote and "environment" in entry:
        return "environment applies to a local server (command); a remote one takes headers"
    try:
        pegboard.effective_name("tool", name)
    except pegboard.RegistrationError:
        return "its name must start with a letter, as it prefixes its tools' names"
    return None
