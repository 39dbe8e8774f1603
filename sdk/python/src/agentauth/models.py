"""The values the SDK returns and takes: typed views of agentauth's JSON.

Each parsed value keeps the answer it came from in ``raw`` (a plain dict), so
a field the server adds later is readable before the SDK names it. No value
prints a token: :class:`Secret` redacts itself in ``repr``, ``str`` and
``format``; reading it is the explicit :meth:`Secret.reveal`.
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, TypeVar

from .errors import ToolCallFailed

__all__ = [
    "TURN_END_TYPES",
    "AccessToken",
    "Actor",
    "AuthSessionStatus",
    "Instance",
    "InstanceDeleted",
    "InstanceList",
    "InstanceRecord",
    "PendingAuthorization",
    "PostedEvent",
    "ResumeTarget",
    "RevokeResult",
    "Secret",
    "Skill",
    "ToolError",
    "ToolInvocation",
    "ToolManifestEntry",
    "TurnAuth",
    "TurnEvent",
    "TurnSummary",
    "UnreadableInstance",
]

# The events a turn ends with: the stream closes after one of them.
TURN_END_TYPES = frozenset({"turn.completed", "turn.failed", "turn.interrupted"})


class Secret:
    """A secret string that never prints itself. ``reveal()`` reads it."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        """The secret's value: pass it on, never log it."""
        return self._value

    def __repr__(self) -> str:
        return "Secret('[redacted]')"

    def __str__(self) -> str:
        return "[redacted]"

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Secret):
            return NotImplemented
        return hmac.compare_digest(self._value.encode(), other._value.encode())

    def __hash__(self) -> int:
        return hash(("agentauth.Secret", self._value))

    def __bool__(self) -> bool:
        return bool(self._value)

    def __reduce__(self) -> Any:
        # A secret is not copied into pickles (caches, multiprocessing) by accident.
        raise TypeError("agentauth.Secret cannot be pickled: reveal() it on purpose")

    # Copies stay in the process, and a Secret is immutable: a copy is itself.
    # Without these, copy and deepcopy would go through __reduce__ and fail —
    # and with them dataclasses.asdict(token) and frameworks that deep-copy
    # the arguments they pass on.
    def __copy__(self) -> Secret:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Secret:
        return self


_FRACTION = re.compile(r"\.(\d+)")


def parse_time(value: Any) -> datetime | None:
    """An RFC 3339 time as Go writes it (``Z``, up to nanoseconds) → an aware datetime."""
    if not isinstance(value, str) or not value:
        return None
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    text = _FRACTION.sub(lambda m: "." + (m.group(1) + "000000")[:6], text, count=1)
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    return parsed


_M = TypeVar("_M")


def each(value: Any, parse: Callable[[Mapping[str, Any]], _M]) -> tuple[_M, ...]:
    """parse of each object of a JSON list (its other items skipped); () when value is no list."""
    return tuple(parse(v) for v in value if isinstance(v, Mapping)) if isinstance(value, list) else ()


def _strs(value: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in value) if isinstance(value, list) else ()


def _dict(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


# --- tokens and consent ------------------------------------------------------


@dataclass(frozen=True)
class AccessToken:
    """A ready access token (``POST /v1/oauth/token`` answered ``ready``)."""

    access_token: Secret
    token_type: str
    expires_at: datetime | None
    scopes: tuple[str, ...]
    refreshable: bool
    ttl_shorter_than_requested: bool = False
    scopes_not_granted: tuple[str, ...] = ()
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> AccessToken:
        raw = {k: v for k, v in body.items() if k != "accessToken"}
        return cls(
            access_token=Secret(_str(body.get("accessToken"))),
            token_type=_str(body.get("tokenType")) or "Bearer",
            expires_at=parse_time(body.get("expiresAt")),
            scopes=_strs(body.get("scopes")),
            refreshable=bool(body.get("refreshable", False)),
            ttl_shorter_than_requested=bool(body.get("ttlShorterThanRequested", False)),
            scopes_not_granted=_strs(body.get("scopesNotGranted")),
            raw=raw,
        )

    def expires_in(self, now: datetime | None = None) -> timedelta | None:
        """Time left, or None when the provider gave no expiry."""
        if self.expires_at is None:
            return None
        return self.expires_at - (now or datetime.now(timezone.utc))

    def authorization_header(self) -> str:
        """``Bearer <token>`` for an upstream call (reveals the token)."""
        return f"{self.token_type or 'Bearer'} {self.access_token.reveal()}"


@dataclass(frozen=True)
class AuthSessionStatus:
    """``GET /v1/oauth/sessions/{id}``: ``pending``, ``exchanging``, ``completed``, ``failed`` or ``expired``."""

    session_id: str
    status: str
    expires_at: datetime | None
    status_reason: str | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, session_id: str, body: Mapping[str, Any]) -> AuthSessionStatus:
        return cls(
            session_id=session_id,
            status=_str(body.get("status")),
            expires_at=parse_time(body.get("expiresAt")),
            status_reason=_str(body.get("statusReason")) or None,
            raw=dict(body),
        )

    @property
    def settled(self) -> bool:
        """The session left pending (and exchanging): waiting longer changes nothing."""
        return self.status not in ("pending", "exchanging", "")


@dataclass(frozen=True)
class RevokeResult:
    """``POST /v1/oauth/revoke``: ``provider_revocation`` is ``revoked``, ``not_configured`` or ``failed``."""

    grant_id: str
    provider_revocation: str
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> RevokeResult:
        return cls(_str(body.get("grantId")), _str(body.get("providerRevocation")), dict(body))


@dataclass(frozen=True)
class PendingAuthorization:
    """A consent an agent instance waits for (``GET /v1/oauth/pending``): the link, never a secret."""

    session_id: str
    oauth_app_ref: str
    provider: str
    subject_mode: str
    authorization_url: str
    expires_at: datetime | None
    message: str
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> PendingAuthorization:
        ref = body.get("oauthAppRef")
        if isinstance(ref, Mapping):
            ref = f"{ref.get('kind') or 'OAuthApp'}/{ref.get('name') or ''}"
        return cls(
            session_id=_str(body.get("authSessionId")),
            oauth_app_ref=_str(ref),
            provider=_str(body.get("provider")),
            subject_mode=_str(body.get("subjectMode")),
            authorization_url=_str(body.get("authorizationUrl")),
            expires_at=parse_time(body.get("expiresAt")),
            message=_str(body.get("message")),
            raw=dict(body),
        )


# --- who a request or turn acts for -------------------------------------------


@dataclass(frozen=True)
class Actor:
    """Who caused a turn: ``type`` is ``user``, ``service`` or ``system``."""

    id: str
    type: str = "user"
    display: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type, "id": self.id}
        if self.display:
            out["display"] = self.display
        return out


@dataclass(frozen=True)
class TurnAuth:
    """Who a turn (or a token request) acts for, which the runtime vouches for:
    the ``actor``, the OAuth ``subjects`` whose grants the tools use
    (``{"user": …}`` or ``{"global": …}``) and the user's verified ``claims``
    that access policies match. ``TurnAuth()`` is no one."""

    actor: Actor | None = None
    subjects: Mapping[str, str] | None = None
    claims: Mapping[str, Any] | None = None

    @classmethod
    def for_user(
        cls, subject: str, *, claims: Mapping[str, Any] | None = None, actor_id: str | None = None
    ) -> TurnAuth:
        """A user's turn: the actor is the user, ``subjects.user`` the OAuth subject."""
        return cls(actor=Actor(id=actor_id or subject), subjects={"user": subject}, claims=claims)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.actor is not None:
            out["actor"] = self.actor.to_json()
        if self.subjects:
            out["subjects"] = dict(self.subjects)
        if self.claims is not None:
            out["claims"] = dict(self.claims)
        return out


@dataclass(frozen=True)
class ResumeTarget:
    """The agent instance a consent wakes (``turn.resume``): ``auth.granted`` is queued to it."""

    swarm: str
    instance_key: str
    agent: str

    def to_json(self) -> dict[str, Any]:
        swarm = self.swarm if "/" in self.swarm else f"Swarm/{self.swarm}"
        return {"swarmRef": swarm, "instanceKey": self.instance_key, "agentName": self.agent}


# --- tools -----------------------------------------------------------------------


@dataclass(frozen=True)
class ToolManifestEntry:
    """One entry of the tool manifest (``GET /v1/agents/tools``)."""

    tool_id: str
    name: str
    description: str
    input_schema: dict[str, Any]
    source_id: str = ""
    source_path: str = ""
    tags: tuple[str, ...] = ()
    version: str = ""
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> ToolManifestEntry:
        return cls(
            tool_id=_str(body.get("tool_id")),
            name=_str(body.get("name")),
            description=_str(body.get("description")),
            input_schema=_dict(body.get("input_schema")) or {"type": "object"},
            source_id=_str(body.get("source_id")),
            source_path=_str(body.get("source_path")),
            tags=_strs(body.get("tags")),
            version=str(body.get("version") or ""),
            raw=dict(body),
        )


@dataclass(frozen=True)
class Skill:
    """A skill the caller may read (``GET /v1/agents/skills``), ranked by ``relevance_score``."""

    name: str
    description: str
    content: str
    scope: str
    relevance_score: float
    tenant_id: str | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> Skill:
        score = body.get("relevance_score")
        return cls(
            name=_str(body.get("name")),
            description=_str(body.get("description")),
            content=_str(body.get("content")),
            scope=_str(body.get("scope")),
            relevance_score=float(score) if isinstance(score, (int, float)) else 0.0,
            tenant_id=_str(body.get("tenant_id")) or None,
            raw=dict(body),
        )


@dataclass(frozen=True)
class ToolError:
    """A tool's error result: ``code`` such as ``E_TOOL_UPSTREAM`` (docs/tools.md, *Routes*)."""

    code: str
    message: str
    name: str = ""
    suggestion: str | None = None


@dataclass(frozen=True)
class ToolInvocation:
    """What ``POST /v1/tools/invoke`` answered: ``status`` ``ok`` (``output``) or ``error`` (``error``).

    An ``authorization_required`` result is never a ToolInvocation: it is raised
    as :class:`~agentauth.errors.AuthorizationRequired`. A tool's error is a
    result for the model to read, not an exception: ``raise_for_error()``
    turns it into one when that suits the caller better.
    """

    status: str
    output: Any = None
    error: ToolError | None = None
    tool_called: dict[str, Any] = field(default_factory=dict, repr=False)
    tool_returned: dict[str, Any] = field(default_factory=dict, repr=False)
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def raise_for_error(self) -> ToolInvocation:

        if self.error is not None or not self.ok:
            err = self.error or ToolError(code="E_TOOL", message=f"tool result status {self.status!r}")
            raise ToolCallFailed(err.message, code=err.code, details={"name": err.name, "suggestion": err.suggestion})
        return self

    def result_json(self) -> dict[str, Any]:
        """The result object as the server sent it (what a model should read)."""
        result = self.raw.get("result")
        return dict(result) if isinstance(result, Mapping) else {"status": self.status}


# --- turns -------------------------------------------------------------------


@dataclass(frozen=True)
class PostedEvent:
    """202 from posting an event: the queued event's id and the agent the ingress rules picked."""

    event_id: str
    swarm: str
    instance_key: str
    agent: str

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> PostedEvent:
        return cls(
            _str(body.get("eventId")), _str(body.get("swarm")), _str(body.get("instanceKey")), _str(body.get("agent"))
        )


@dataclass(frozen=True)
class InstanceRecord:
    """An agent instance's record (``list_instances``' ``data``, what ``pause_instance``,
    ``resume_instance`` and ``terminate_instance`` answer): ``status`` is ``active``,
    ``paused`` or ``terminated``; ``active_turn`` the id of the turn that holds it, None
    when it is idle. :meth:`~agentauth.AsyncClient.get_instance` answers an :class:`Instance`.
    """

    swarm: str
    instance_key: str
    agent: str
    status: str
    active_turn: str | None
    created_at: datetime | None
    updated_at: datetime | None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> InstanceRecord:
        active = body.get("activeTurn")
        if isinstance(active, Mapping):
            active = active.get("id")
        return cls(
            swarm=_str(body.get("swarm")),
            instance_key=_str(body.get("instanceKey")),
            agent=_str(body.get("agent")),
            status=_str(body.get("status")),
            active_turn=active if isinstance(active, str) and active else None,
            created_at=parse_time(body.get("createdAt")),
            updated_at=parse_time(body.get("updatedAt")),
            raw=dict(body),
        )


@dataclass(frozen=True)
class UnreadableInstance:
    """An instance the store could not read (a corrupt record): ``id`` is the store's name for
    it, ``reason`` what failed; ``swarm``, ``instance_key`` and ``agent`` when the store knows them."""

    id: str
    reason: str
    swarm: str | None
    instance_key: str | None
    agent: str | None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> UnreadableInstance:
        return cls(
            id=_str(body.get("id")),
            reason=_str(body.get("reason")),
            swarm=_str(body.get("swarm")) or None,
            instance_key=_str(body.get("instanceKey")) or None,
            agent=_str(body.get("agent")) or None,
            raw=dict(body),
        )


@dataclass(frozen=True)
class InstanceList:
    """``GET /v1/instances``: every instance the store could read (``data``), and those it
    could not (``unreadable``, listed apart so that one bad record hides none of the others)."""

    data: tuple[InstanceRecord, ...]
    unreadable: tuple[UnreadableInstance, ...]
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> InstanceList:
        return cls(
            data=each(body.get("data"), InstanceRecord.from_json),
            unreadable=each(body.get("unreadable"), UnreadableInstance.from_json),
            raw=dict(body),
        )


@dataclass(frozen=True)
class TurnSummary:
    """A turn without its conversation: counters, outcome and the final answer.

    ``input_event_id`` is the id of the event the turn handles — the
    ``event_id`` its post answered (:class:`PostedEvent`): how the poster
    finds its turn. None from a server that does not name it.
    """

    id: str
    status: str
    input_type: str
    trace_id: str
    steps: int
    tool_calls: int
    errors: int
    started_at: datetime | None
    ended_at: datetime | None
    final_answer: str | None
    error: dict[str, Any] | None
    input_event_id: str | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> TurnSummary:
        err = body.get("error")
        return cls(
            id=_str(body.get("id")),
            status=_str(body.get("status")),
            input_type=_str(body.get("inputType")),
            trace_id=_str(body.get("traceId")),
            steps=_int(body.get("steps")),
            tool_calls=_int(body.get("toolCalls")),
            errors=_int(body.get("errors")),
            started_at=parse_time(body.get("startedAt")),
            ended_at=parse_time(body.get("endedAt")),
            final_answer=_str(body.get("finalAnswer")) or None,
            error=dict(err) if isinstance(err, Mapping) else None,
            input_event_id=_str(body.get("inputEventId")) or None,
            raw=dict(body),
        )


@dataclass(frozen=True)
class Instance:
    """``GET …/{agent}``: the instance's record and, beside it, its active turn, backlog size
    and recent turns (newest first) — one flat value, as the route answers.

    It has :class:`InstanceRecord`'s fields but is not one: here ``active_turn`` is the
    turn itself (a :class:`TurnSummary`, None when the instance is idle), where a
    record names it by id.
    """

    swarm: str
    instance_key: str
    agent: str
    status: str
    active_turn: TurnSummary | None
    backlog: int
    recent_turns: tuple[TurnSummary, ...]
    created_at: datetime | None
    updated_at: datetime | None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> Instance:
        active = body.get("activeTurn")
        return cls(
            swarm=_str(body.get("swarm")),
            instance_key=_str(body.get("instanceKey")),
            agent=_str(body.get("agent")),
            status=_str(body.get("status")),
            active_turn=TurnSummary.from_json(active) if isinstance(active, Mapping) else None,
            backlog=_int(body.get("backlog")),
            recent_turns=each(body.get("recentTurns"), TurnSummary.from_json),
            created_at=parse_time(body.get("createdAt")),
            updated_at=parse_time(body.get("updatedAt")),
            raw=dict(body),
        )


@dataclass(frozen=True)
class InstanceDeleted:
    deleted: bool
    oauth_grants_kept: bool


@dataclass(frozen=True)
class TurnEvent:
    """One event of a turn: ``seq`` counts from 0; ``type`` such as ``turn.parked``."""

    turn_id: str
    seq: int
    type: str
    at: datetime | None
    data: dict[str, Any]
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> TurnEvent:
        seq = body.get("seq")
        if not isinstance(seq, int) or isinstance(seq, bool):
            raise ValueError("turn event without an integer seq")
        return cls(
            turn_id=_str(body.get("turnId")),
            seq=seq,
            type=_str(body.get("type")),
            at=parse_time(body.get("at")),
            data=_dict(body.get("data")),
            raw=dict(body),
        )

    @property
    def terminal(self) -> bool:
        """The turn's last event: ``turn.completed``, ``turn.failed`` or ``turn.interrupted``."""
        return self.type in TURN_END_TYPES
