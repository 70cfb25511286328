"""The trusted permission service: ordered rules, the host's approver, saved approvals."""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import re
import secrets
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TypeAlias

import anyio
import anyio.to_thread
import attrs

from ._errors import ToolFailure

__all__ = (
    "Approver",
    "PermissionRejected",
    "PermissionRequest",
    "PermissionRule",
    "Permissions",
    "Reject",
    "default_approvals_file",
)

logger = logging.getLogger("pegboard")

Effect: TypeAlias = Literal["allow", "deny", "ask"]


def _effect(_: object, __: attrs.Attribute[str], value: object) -> None:
    if value not in ("allow", "deny", "ask"):
        raise ValueError(f"a rule's effect is 'allow', 'deny' or 'ask', not {value!r}")


@attrs.frozen
class PermissionRule:
    """One rule: ``action`` and ``resource`` patterns (``*``, ``?``) and an ``effect``.

    A pattern ending in `` *`` also matches the bare command (``git *`` matches ``git``).
    """

    action: str
    resource: str
    effect: Effect = attrs.field(validator=_effect)

    def matches(self, action: str, resource: str) -> bool:
        return _match(self.action, action) and _match(self.resource, resource)


def _strings(values: Iterable[str]) -> tuple[str, ...]:
    # A named converter, so type checkers see what the fields accept.
    return tuple(values)


@attrs.frozen(kw_only=True)
class PermissionRequest:
    """What a tool asks permission for.

    ``resources`` are what the action touches (paths, a command); ``always`` the
    patterns to save when the user answers "always" (default: the resources);
    ``metadata`` anything the approver may show.
    """

    action: str
    resources: tuple[str, ...] = attrs.field(converter=_strings)
    always: tuple[str, ...] = attrs.field(default=(), converter=_strings)
    metadata: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class Reject:
    """An approver's "no", with feedback for the model or without."""

    message: str | None = None


#: The host's approver: answers one request ``"once"``, ``"always"`` or with a `Reject`.
Approver: TypeAlias = Callable[[PermissionRequest], Awaitable["Literal['once', 'always'] | Reject"]]


class PermissionRejected(Exception):  # noqa: N818 - reads as what happened
    """The user rejected a request without feedback: the call stops operationally."""


@functools.lru_cache(maxsize=512)
def _compile(pattern: str) -> re.Pattern[str]:
    body = "".join(
        ".*" if char == "*" else "." if char == "?" else re.escape(char) for char in pattern
    )
    if pattern.endswith(" *"):
        body = f"{body[:-4]}(?: .*)?"  # "git *" also matches the bare "git"
    return re.compile(body, re.DOTALL)


def _match(pattern: str, value: str) -> bool:
    return _compile(pattern).fullmatch(value) is not None


def default_approvals_file(root: Path) -> Path:
    """Where "always" approvals for the Location at ``root`` persist.

    Outside the Location, so a repository can never ship its own approvals.
    """
    import platformdirs  # imported on first use, like every optional cost

    digest = hashlib.sha256(os.fsencode(root)).hexdigest()[:32]
    return platformdirs.user_data_path("pegboard") / "approvals" / f"{digest}.json"


def _rules(rules: Iterable[PermissionRule | Mapping[str, str]]) -> tuple[PermissionRule, ...]:
    made = []
    for index, rule in enumerate(rules):
        if isinstance(rule, PermissionRule):
            made.append(rule)
            continue
        if not isinstance(rule, Mapping) or set(rule) != {"action", "resource", "effect"}:
            raise ValueError(
                f"permissions[{index}] must be {{action, resource, effect}}, got {rule!r}"
            )
        made.append(PermissionRule(rule["action"], rule["resource"], rule["effect"]))  # type: ignore[arg-type]
    return tuple(made)


class Permissions:
    """Evaluates requests against ordered rules and asks the host's approver.

    The last matching rule wins; no match means ``ask``. ``deny`` is final: no
    saved approval overrides it. ``ask`` goes to the approver, unless an
    earlier "always" covers the resource; without an approver, ``ask`` means
    reject. "Always" approvals persist for the Location across restarts.
    """

    def __init__(
        self,
        rules: Iterable[PermissionRule | Mapping[str, str]] = (),
        *,
        approver: Approver | None = None,
        approvals_file: Path | None = None,
    ) -> None:
        self.rules = _rules(rules)
        self._approver = approver
        self._file = approvals_file
        self._saved: list[tuple[str, str]] | None = None
        self._lock = anyio.Lock()

    def evaluate(self, action: str, resource: str) -> Effect:
        """The effect of the rules alone on one action and resource."""
        for rule in reversed(self.rules):
            if rule.matches(action, resource):
                return rule.effect
        return "ask"

    async def ask(self, request: PermissionRequest) -> None:
        """Return if ``request`` is allowed; otherwise raise.

        Raises `pegboard.ToolFailure` for a deny rule or a reject with feedback,
        and `PermissionRejected` for a reject without feedback.
        """
        if not request.resources:
            raise ValueError("a permission request names at least one resource")
        effects = {
            resource: self.evaluate(request.action, resource) for resource in request.resources
        }
        denied = [resource for resource, effect in effects.items() if effect == "deny"]
        if denied:
            raise ToolFailure(
                f"permission denied: {request.action} on {', '.join(denied)} is denied by "
                "this Location's rules"
            )
        async with self._lock:
            saved = await self._load()
            pending = [
                resource
                for resource, effect in effects.items()
                if effect == "ask"
                and not any(
                    action == request.action and _match(pattern, resource)
                    for action, pattern in saved
                )
            ]
            if not pending:
                return
            if self._approver is None:
                raise PermissionRejected(
                    f"{request.action} on {', '.join(pending)} needs approval and this host "
                    "has no approver"
                )
            answer = await self._approver(request)
            if answer == "once":
                return
            if answer == "always":
                patterns = request.always or request.resources
                saved.extend((request.action, pattern) for pattern in patterns)
                await self._store(saved)
                return
            if isinstance(answer, Reject):
                if answer.message:
                    raise ToolFailure(f"the user rejected {request.action}: {answer.message}")
                raise PermissionRejected(f"the user rejected {request.action}")
            raise TypeError(
                f"the approver answered {answer!r}; answer 'once', 'always' or pegboard.Reject(...)"
            )

    async def _load(self) -> list[tuple[str, str]]:
        if self._saved is None:
            self._saved = await anyio.to_thread.run_sync(self._read)
        return self._saved

    def _read(self) -> list[tuple[str, str]]:
        if self._file is None:
            return []
        try:
            data = json.loads(self._file.read_text(encoding="utf-8"))
            return [(str(item["action"]), str(item["pattern"])) for item in data["approvals"]]
        except FileNotFoundError:
            return []
        except (OSError, ValueError, KeyError, TypeError) as error:
            logger.warning("ignoring unreadable saved approvals in %s: %s", self._file, error)
            return []

    async def _store(self, saved: Sequence[tuple[str, str]]) -> None:
        if self._file is not None:
            self._saved = await anyio.to_thread.run_sync(self._write, list(saved))

    def _write(self, saved: list[tuple[str, str]]) -> list[tuple[str, str]]:
        assert self._file is not None
        # Another Location on the same root may have saved approvals since we
        # loaded ours: keep theirs too instead of overwriting them.
        merged = list(dict.fromkeys([*self._read(), *saved]))
        self._file.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        data = {"approvals": [{"action": a, "pattern": p} for a, p in merged]}
        temporary = self._file.with_suffix(f".{os.getpid()}.{secrets.token_hex(4)}.tmp")
        temporary.write_text(json.dumps(data, indent=1), encoding="utf-8")
        os.replace(temporary, self._file)
        return merged
