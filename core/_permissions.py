"""The trusted permission service: ordered rules, the host's approver, saved approvals."""

from __future__ import annotations

import datetime
import functools
import hashlib
import json
import logging
import os
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Literal, TypeAlias

import anyio
import anyio.to_thread
import attrs

from ._errors import ToolFailure

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._secrets import Secrets

__all__ = (
    "Approver",
    "PermissionRejected",
    "PermissionRequest",
    "PermissionRule",
    "Permissions",
    "Reject",
    "SavedApproval",
    "asker",
    "default_approvals_file",
    "question_watch",
)

logger = logging.getLogger("pegboard")

#: Who the approver asks for the current task, when that is not one person: a
#: served client answers only its own calls, so identical questions are shared
#: only between tasks with the same asker.
asker: ContextVar[object] = ContextVar("pegboard_asker", default=None)

#: Told ``("asked", request)`` when the current task's call puts a question to
#: the approver (or waits on an identical one) and ``("withdrawn", request)``
#: when the call is cancelled before the answer: a step runner's events.
question_watch: ContextVar[Callable[[str, PermissionRequest], None] | None] = ContextVar(
    "pegboard_question_watch", default=None
)

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

    ``opaque`` names resources whose effect cannot be known before the action
    runs (``eval "$x"``, a command the shell parser cannot read): no allow rule
    and no saved approval covers them, so they are always asked, while deny and
    ask rules still apply. ``embedding`` names resources that embed another
    action (``echo "$(…)"``): the host's rules apply, saved approvals never do.
    Both are subsets of ``resources``.

    .. versionadded:: 0.1 ``opaque`` and ``embedding``.
    """

    action: str
    resources: tuple[str, ...] = attrs.field(converter=_strings)
    always: tuple[str, ...] = attrs.field(default=(), converter=_strings)
    metadata: Mapping[str, Any] = attrs.field(factory=dict)
    opaque: tuple[str, ...] = attrs.field(default=(), converter=_strings)
    embedding: tuple[str, ...] = attrs.field(default=(), converter=_strings)


@attrs.frozen(kw_only=True)
class SavedApproval:
    """One "always" answer saved for a Location: a pattern and where it came from.

    ``resources``, ``command`` (the request's ``command`` metadata, if any) and
    ``at`` (UTC, ISO 8601) describe the approved request; approvals saved by
    earlier versions carry none of them.
    """

    action: str
    pattern: str
    resources: tuple[str, ...] = attrs.field(default=(), converter=_strings)
    command: str | None = None
    at: str | None = None

    def covers(self, action: str, resource: str) -> bool:
        return action == self.action and _match(self.pattern, resource)


@attrs.frozen
class Reject:
    """An approver's "no", with feedback for the model or without."""

    message: str | None = None


#: The host's approver: answers one request ``"once"``, ``"always"`` or with a `Reject`.
Approver: TypeAlias = Callable[[PermissionRequest], Awaitable["Literal['once', 'always'] | Reject"]]


class PermissionRejected(Exception):  # noqa: N818 - reads as what happened
    """The user rejected a request without feedback: the call stops operationally.

    ``request`` is the request rejected, where known, so that a host can name the
    rule that would allow it.
    """

    def __init__(self, message: str, *, request: PermissionRequest | None = None) -> None:
        super().__init__(message)
        self.request = request


_TOKENS = re.compile(r"\\[*?\\]|.", re.DOTALL)


@functools.lru_cache(maxsize=512)
def _compile(pattern: str) -> re.Pattern[str]:
    tokens = _TOKENS.findall(pattern)
    parts = [
        ".*" if token == "*" else "." if token == "?" else re.escape(token[-1]) for token in tokens
    ]
    if tokens[-2:] == [" ", "*"]:
        parts[-2:] = ["(?: .*)?"]  # "git *" also matches the bare "git"
    return re.compile("".join(parts), re.DOTALL)


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


class _Question:
    """One question on its way to the approver, and the answer others may share."""

    def __init__(self) -> None:
        self.answered = anyio.Event()
        self.answer: Literal["once", "always"] | Reject | None = None


class Permissions:
    """Evaluates requests against ordered rules and asks the host's approver.

    The last matching rule wins; no match means ``ask``. ``deny`` is final: no
    saved approval overrides it. ``ask`` goes to the approver, unless an
    earlier "always" covers the resource; without an approver, ``ask`` means
    reject. "Always" approvals persist for the Location across restarts.

    Each question waits for its own answer only: an unanswered question never
    holds up another request, and identical questions asked at the same time
    share one answer.
    """

    def __init__(
        self,
        rules: Iterable[PermissionRule | Mapping[str, str]] = (),
        *,
        approver: Approver | None = None,
        approvals_file: Path | None = None,
        secrets: Secrets | None = None,
    ) -> None:
        self.rules = _rules(rules)
        #: The host's secrets: the approver and a rejection never show a value.
        self._secrets = secrets
        self._approver = approver
        self._file = approvals_file
        self._saved: list[SavedApproval] | None = None
        self._file_lock = anyio.Lock()  # held for file access only, never across a question
        self._asking: dict[tuple[Any, ...], _Question] = {}

    def evaluate(self, action: str, resource: str, *, opaque: bool = False) -> Effect:
        """The effect of the rules alone on one action and resource.

        For an ``opaque`` resource allow rules do not count: it is denied,
        or asked.
        """
        for rule in reversed(self.rules):
            if opaque and rule.effect == "allow":
                continue
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
        strays = set(request.opaque + request.embedding) - set(request.resources)
        if strays:
            raise ValueError(
                f"opaque and embedding name resources of the request; {sorted(strays)} are not"
            )
        opaque = set(request.opaque)
        effects = {
            resource: self.evaluate(request.action, resource, opaque=resource in opaque)
            for resource in request.resources
        }
        denied = [resource for resource, effect in effects.items() if effect == "deny"]
        if denied:
            raise ToolFailure(
                f"permission denied: {request.action} on {', '.join(denied)} is denied by "
                "this Location's rules"
            )
        saved = await self._load()
        unsaved = opaque | set(request.embedding)
        pending = [
            resource
            for resource, effect in effects.items()
            if effect == "ask"
            and (
                resource in unsaved
                or not any(approval.covers(request.action, resource) for approval in saved)
            )
        ]
        if not pending:
            return
        if self._approver is None:
            raise PermissionRejected(
                self._redact(
                    f"{request.action} on {', '.join(pending)} needs approval and this host "
                    "has no approver"
                ),
                request=self._shown(request),
            )
        answer = await self._question(request, self._approver)
        if answer == "once":
            return
        if answer == "always":
            # Saved as shown: a pattern holding a secret is never written down.
            await self._save(self._shown(request))
            return
        if isinstance(answer, Reject):
            if answer.message:
                raise ToolFailure(f"the user rejected {request.action}: {answer.message}")
            raise PermissionRejected(
                self._redact(f"the user rejected {request.action}"), request=self._shown(request)
            )
        raise TypeError(
            f"the approver answered {answer!r}; answer 'once', 'always' or pegboard.Reject(...)"
        )

    async def _question(
        self, request: PermissionRequest, approver: Approver
    ) -> Literal["once", "always"] | Reject:
        """The approver's answer to ``request``, shared with identical questions meanwhile."""
        watch = question_watch.get()
        if watch is None:
            return await self._answer(request, approver)
        watch("asked", request)
        try:
            return await self._answer(request, approver)
        except anyio.get_cancelled_exc_class():
            watch("withdrawn", request)
            raise

    async def _answer(
        self, request: PermissionRequest, approver: Approver
    ) -> Literal["once", "always"] | Reject:
        # Identical means all the approver would see: the metadata too (the workdir of a command).
        shown = json.dumps(request.metadata, sort_keys=True, default=repr)
        key = (request.action, request.resources, request.opaque, request.embedding,
               request.always, shown, asker.get())  # fmt: skip
        while (waiting := self._asking.get(key)) is not None:
            await waiting.answered.wait()
            if waiting.answer is not None:
                return waiting.answer
            # The one who asked was cancelled or failed: ask again ourselves.
        question = self._asking[key] = _Question()
        try:
            question.answer = await approver(self._shown(request))
            return question.answer
        finally:
            del self._asking[key]
            question.answered.set()

    def _redact(self, text: str) -> str:
        return text if self._secrets is None else self._secrets.redact(text)

    def _shown(self, request: PermissionRequest) -> PermissionRequest:
        """``request`` as the approver may see it: no secret's value in it."""
        secrets = self._secrets
        if secrets is None:
            return request
        return PermissionRequest(
            action=secrets.redact(request.action),
            resources=[secrets.redact(item) for item in request.resources],
            always=[secrets.redact(item) for item in request.always],
            metadata=secrets.redact_json(request.metadata),
            opaque=[secrets.redact(item) for item in request.opaque],
            embedding=[secrets.redact(item) for item in request.embedding],
        )

    async def approvals(self) -> tuple[SavedApproval, ...]:
        """The saved "always" approvals of this Location, oldest first, read afresh."""
        async with self._file_lock:
            self._saved = await anyio.to_thread.run_sync(self._read)
            return tuple(self._saved)

    async def revoke(self, *approvals: SavedApproval) -> int:
        """Forget ``approvals`` (matched by action and pattern); return how many went."""
        gone = {(approval.action, approval.pattern) for approval in approvals}
        async with self._file_lock:
            before, saved = await anyio.to_thread.run_sync(self._rewrite, gone, [])
            self._saved = saved
        return before - len(saved)

    async def _load(self) -> list[SavedApproval]:
        if self._saved is None and self._file is None:
            self._saved = []
        if self._saved is None:
            async with self._file_lock:
                if self._saved is None:
                    self._saved = await anyio.to_thread.run_sync(self._read)
        return self._saved

    async def _save(self, request: PermissionRequest) -> None:
        command = request.metadata.get("command")
        at = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
        made = [
            SavedApproval(
                action=request.action,
                pattern=pattern,
                resources=request.resources,
                command=command if isinstance(command, str) else None,
                at=at,
            )
            for pattern in (request.always or self._resources_to_save(request))
        ]
        async with self._file_lock:
            _, self._saved = await anyio.to_thread.run_sync(self._rewrite, set(), made)

    @staticmethod
    def _resources_to_save(request: PermissionRequest) -> tuple[str, ...]:
        # Never an opaque or embedding resource: no saved approval may cover those.
        unsaved = set(request.opaque) | set(request.embedding)
        return tuple(resource for resource in request.resources if resource not in unsaved)

    def _read(self) -> list[SavedApproval]:
        if self._file is None:
            return list(self._saved or ())
        try:
            data = json.loads(self._file.read_text(encoding="utf-8"))
            return [_approval(item) for item in data["approvals"]]
        except FileNotFoundError:
            return []
        except (OSError, ValueError, KeyError, TypeError) as error:
            logger.warning("ignoring unreadable saved approvals in %s: %s", self._file, error)
            return []

    def _rewrite(
        self, gone: set[tuple[str, str]], added: list[SavedApproval]
    ) -> tuple[int, list[SavedApproval]]:
        """Drop ``gone`` from the file and append ``added``; (count before, what is saved now).

        Read afresh first: another Location on the same root may have saved
        or revoked approvals since we loaded ours.
        """
        current = self._read()
        known = {(item.action, item.pattern) for item in current}
        kept = [item for item in current if (item.action, item.pattern) not in gone]
        kept += [item for item in added if (item.action, item.pattern) not in known]
        if self._file is None:
            return len(current), kept
        self._file.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        data = {"approvals": [_record(item) for item in kept]}
        import secrets

        temporary = self._file.with_suffix(f".{os.getpid()}.{secrets.token_hex(4)}.tmp")
        temporary.write_text(json.dumps(data, indent=1, ensure_ascii=False), encoding="utf-8")
        os.replace(temporary, self._file)
        return len(current), kept


def _approval(item: Mapping[str, Any]) -> SavedApproval:
    approved = item.get("approved") or {}
    return SavedApproval(
        action=str(item["action"]),
        pattern=str(item["pattern"]),
        resources=[str(resource) for resource in approved.get("resources", ())],
        command=None if approved.get("command") is None else str(approved["command"]),
        at=None if approved.get("at") is None else str(approved["at"]),
    )


def _record(approval: SavedApproval) -> dict[str, Any]:
    """One approval as the file holds it; ``action`` and ``pattern`` as in earlier versions."""
    record: dict[str, Any] = {"action": approval.action, "pattern": approval.pattern}
    if approval.at is not None:
        approved: dict[str, Any] = {"resources": list(approval.resources), "at": approval.at}
        if approval.command is not None:
            approved["command"] = approval.command
        record["approved"] = approved
    return record
