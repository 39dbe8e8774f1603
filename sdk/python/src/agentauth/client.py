"""The clients: :class:`AsyncClient` (httpx.AsyncClient, for agent runtimes)
and :class:`Client` (httpx.Client), one surface.

Both only send the requests :mod:`agentauth._core` builds and read the
answers it parses; what differs is the I/O (``await`` or not) and how they
sleep. Every request has a timeout; safe requests are retried
(:func:`agentauth._core.retry_delay` says which).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator, Callable, Collection, Iterator, Mapping, Sequence
from datetime import timedelta
from types import TracebackType
from typing import Any, TypeVar

import httpx

from . import _core as core
from . import errors
from ._auth import AwsCredentials, Credentials
from ._core import Op, RetryPolicy, Settings, Timeouts, TokenSource
from .models import (
    AccessToken,
    Actor,
    AuthSessionStatus,
    Instance,
    InstanceDeleted,
    InstanceList,
    InstanceRecord,
    PendingAuthorization,
    PostedEvent,
    ResumeTarget,
    RevokeResult,
    Secret,
    Skill,
    ToolInvocation,
    ToolManifestEntry,
    TurnAuth,
    TurnEvent,
    TurnSummary,
)

__all__ = ["AsyncClient", "Client"]

T = TypeVar("T")
_A = TypeVar("_A", bound="AsyncClient")
_C = TypeVar("_C", bound="Client")

AuthLike = TurnAuth | Mapping[str, Any] | None
ActorLike = Actor | str | Mapping[str, Any] | None

# How often follow_turn() polls the JSON form where streams are refused (406).
POLL_INTERVAL = 1.0
# How often wait_for_turn() looks for the turn an event started.
TURN_POLL_INTERVAL = 0.2


class _Base:
    def __init__(
        self,
        base_url: str | None,
        *,
        runtime_token: str | Secret | None,
        agent_token: str | Secret | TokenSource | None,
        auth: str | None,
        stream_url: str | None,
        region: str | None,
        timeouts: Timeouts | None,
        retry: RetryPolicy | None,
        env: Mapping[str, str] | None,
        aws_credentials: AwsCredentials | None,
    ) -> None:
        self._settings = Settings.resolve(
            base_url=base_url,
            runtime_token=runtime_token,
            agent_token=agent_token,
            auth=auth,
            stream_url=stream_url,
            region=region,
            timeouts=timeouts,
            retry=retry,
            env=env,
        )
        self._creds = Credentials(self._settings, aws_credentials)

    @property
    def base_url(self) -> str:
        return self._settings.base_url

    @property
    def stream_url(self) -> str | None:
        return self._settings.stream_url

    def __repr__(self) -> str:
        return f"{type(self).__name__}(base_url={self.base_url!r}, auth={self._settings.auth!r})"


class AsyncClient(_Base):
    """agentauth over ``httpx.AsyncClient``.

    Arguments override the environment: ``base_url`` (``AGENTAUTH_URL``,
    default ``http://127.0.0.1:8080``), ``runtime_token``
    (``AGENTAUTH_RUNTIME_TOKEN``), ``agent_token`` (``AGENTAUTH_AGENT_TOKEN``;
    a callable, or a coroutine function, is asked on every request), ``auth`` (``AGENTAUTH_AUTH``:
    ``token`` or ``sigv4``), ``stream_url`` (``AGENTAUTH_STREAM_URL``) and
    ``region`` (``AWS_REGION``). Use it as ``async with AsyncClient() as c:``
    or call :meth:`aclose`.
    """

    def __init__(
        self,
        base_url: str | None = None,
        *,
        runtime_token: str | Secret | None = None,
        agent_token: str | Secret | TokenSource | None = None,
        auth: str | None = None,
        stream_url: str | None = None,
        region: str | None = None,
        timeouts: Timeouts | None = None,
        retry: RetryPolicy | None = None,
        env: Mapping[str, str] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        aws_credentials: AwsCredentials | None = None,
    ) -> None:
        super().__init__(
            base_url,
            runtime_token=runtime_token,
            agent_token=agent_token,
            auth=auth,
            stream_url=stream_url,
            region=region,
            timeouts=timeouts,
            retry=retry,
            env=env,
            aws_credentials=aws_credentials,
        )
        self._http = httpx.AsyncClient(transport=transport, follow_redirects=False, trust_env=transport is None)

    async def __aenter__(self: _A) -> _A:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    # --- transport ---

    async def _send(self, call: core.Call, deadline: float | None = None) -> httpx.Response:
        """Send call, again where :func:`agentauth._core.retry_delay` says it is safe;
        with a ``deadline`` (``time.monotonic()``), no attempt or wait goes past it."""
        policy = self._settings.retry
        attempt = 0
        while True:
            attempt += 1
            auth = self._creds.auth(call.credential)
            request = core.build_request(self._http, self._settings, call, deadline)
            outcome: httpx.Response | httpx.RequestError
            try:
                outcome = await self._http.send(request, auth=auth)
            except httpx.RequestError as exc:  # a TransportError, or an answer httpx could not decode
                outcome = exc
            delay = core.retry_delay(policy, call, attempt, outcome, deadline)
            if delay is not None:
                await asyncio.sleep(delay)
                continue
            if isinstance(outcome, httpx.Response):
                return outcome
            # Raised here, not in the except block, and without the local:
            # httpx's exception holds the request, headers and all, and
            # travels neither chained to the error nor in its frames.
            error = core.connection_error(call, outcome)
            del outcome
            raise error

    async def _run(self, op: Op[T], deadline: float | None = None) -> T:
        return op.parse(await self._send(op.call, deadline))

    # --- tokens and consent ---

    async def get_access_token(
        self,
        app: str,
        *,
        subjects: Mapping[str, str] | None = None,
        scopes: Sequence[str] | None = None,
        min_ttl: float | timedelta | None = None,
        resume: ResumeTarget | None = None,
        actor: ActorLike = None,
        claims: Mapping[str, Any] | None = None,
        auth: AuthLike = None,
        origin: Mapping[str, Any] | None = None,
    ) -> AccessToken:
        """A token of ``app`` (``name`` or ``OAuthApp/name``) for ``subjects`` (``{"user": …}``).

        Raises :class:`~agentauth.errors.AuthorizationRequired` when the user
        must consent first, or the error result's typed error
        (``ScopeNotAllowed``, ``RefreshFailed``, …). ``min_ttl`` (seconds,
        default 300 on the server) is the least life the token must have
        left; ``resume`` names the agent instance the consent wakes.
        """
        return await self._run(
            core.get_access_token(
                app,
                subjects=subjects,
                scopes=scopes,
                min_ttl=min_ttl,
                resume=resume,
                actor=actor,
                claims=claims,
                auth=auth,
                origin=origin,
            )
        )

    async def authorization_status(self, session_id: str, *, wait: int | None = None) -> AuthSessionStatus:
        """A consent session's status; ``wait`` (≤ 55 s) long-polls until it leaves ``pending``."""
        return await self._run(core.authorization_status(session_id, wait, self._settings.timeouts))

    async def wait_for_authorization(
        self, session: str | errors.AuthorizationRequired, timeout: float = 600.0
    ) -> AuthSessionStatus:
        """Wait until the user has consented (long polls of at most 55 s each).

        Returns the ``completed`` session; raises ``AuthorizationFailed`` or
        ``AuthorizationExpired`` (with ``reason``) when it ended otherwise, and
        ``AuthorizationTimeout`` when it is still pending after ``timeout`` seconds.
        """
        sid = core.session_id_of(session)
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            wait = max(0, min(core.MAX_WAIT_CHUNK, math.floor(remaining)))
            started = time.monotonic()
            op = core.authorization_status(sid, wait, self._settings.timeouts)
            try:
                # Retries and timeouts within the deadline: a lost long poll is not sent again past it.
                status = await self._run(op, deadline + core.DEADLINE_GRACE)
            except errors.Timeout:
                if time.monotonic() < deadline:
                    raise
                status = None
            if status is not None and status.settled:
                return core.settle(status)
            if time.monotonic() >= deadline:
                raise errors.AuthorizationTimeout(
                    f"auth session {sid} still {status.status if status else 'pending'} after {timeout:g} s",
                    session_id=sid,
                )
            if time.monotonic() - started < 1:  # a server that does not hold the poll
                await asyncio.sleep(min(1.0, max(0.0, deadline - time.monotonic())))

    async def pending_authorizations(self, swarm: str, instance_key: str, agent: str) -> list[PendingAuthorization]:
        """The consents an agent instance waits for, with their links (``auth.pending``)."""
        return await self._run(core.pending(ResumeTarget(swarm, instance_key, agent)))

    async def revoke(self, app: str, subject: str) -> RevokeResult:
        """Revoke ``subject``'s grant of ``app`` (at the provider too when it has a revokeUrl);
        ``GrantNotFound`` when there is none."""
        return await self._run(core.revoke(app, subject))

    # --- tools ---

    async def list_tools(self) -> list[ToolManifestEntry]:
        """The tools the agent JWT's claims may see (the manifest)."""
        return await self._run(core.list_tools())

    async def search_skills(self, query: str, *, top_k: int | None = None) -> list[Skill]:
        """The skills the agent may read, ranked for ``query``."""
        return await self._run(core.search_skills(query, top_k))

    async def invoke_tool(
        self, tool_name: str, args: Mapping[str, Any] | None = None, *, call_id: str | None = None
    ) -> ToolInvocation:
        """Call a tool through agentauth's tool hooks. Raises ``AuthorizationRequired`` when
        the tool's OAuth app needs the user's consent; a tool's error is a result."""
        return await self._run(core.invoke_tool(tool_name, args, call_id))

    # --- turns ---

    async def post_event(
        self,
        swarm: str,
        instance_key: str,
        text: str | None = None,
        *,
        auth: AuthLike,
        origin: Mapping[str, Any] | None = None,
        id: str | None = None,
        type: str | None = None,
        agent: str | None = None,
        properties: Mapping[str, str] | None = None,
    ) -> PostedEvent:
        """Queue an event (a user's message) for an agent instance; the swarm's ingress rules
        pick the agent. ``auth`` is who the turn acts for (``TurnAuth()`` for no one). ``id``
        (default: ``sdk-<uuid>``, one per call) makes a repeated post queue the event once:
        the SDK's own retry after a lost answer, and yours when you pass the same id."""
        return await self._run(
            core.post_event(
                swarm,
                instance_key,
                text=text,
                auth=auth,
                origin=origin,
                id=id,
                type=type,
                agent=agent,
                properties=properties,
            )
        )

    async def list_instances(self) -> InstanceList:
        """Every agent instance (``data``), and those the store could not read (``unreadable``)."""
        return await self._run(core.list_instances())

    async def get_instance(self, swarm: str, instance_key: str, agent: str) -> Instance:
        return await self._run(core.get_instance(swarm, instance_key, agent))

    async def pause_instance(self, swarm: str, instance_key: str, agent: str) -> InstanceRecord:
        return await self._run(core.lifecycle(swarm, instance_key, agent, "pause"))

    async def resume_instance(self, swarm: str, instance_key: str, agent: str) -> InstanceRecord:
        """Run the instance again; a wake-up carries the interrupted turn on.
        Not resent after a lost answer: each resume queues a wake-up."""
        return await self._run(core.lifecycle(swarm, instance_key, agent, "resume"))

    async def terminate_instance(
        self, swarm: str, instance_key: str, agent: str, reason: str | None = None
    ) -> InstanceRecord:
        return await self._run(core.lifecycle(swarm, instance_key, agent, "terminate", reason))

    async def delete_instance(self, swarm: str, instance_key: str, agent: str) -> InstanceDeleted:
        """Remove the instance and its history; its OAuth grants stay."""
        return await self._run(core.delete_instance(swarm, instance_key, agent))

    async def turn_events(
        self, swarm: str, instance_key: str, agent: str, turn_id: str, *, after: int | None = None
    ) -> list[TurnEvent]:
        """A turn's events with ``seq`` > ``after`` (all without), as JSON."""
        return await self._run(core.turn_events(swarm, instance_key, agent, turn_id, after))

    async def wait_for_turn(
        self, swarm: str, instance_key: str, agent: str, *, ignore: Collection[str] = (), timeout: float = 30.0
    ) -> TurnSummary:
        """The instance's newest turn whose id is not in ``ignore``, once there is one
        (a posted event's turn starts when the worker picks it up)."""
        deadline = time.monotonic() + timeout
        while True:
            found = _new_turn(await self._get_instance_or_none(swarm, instance_key, agent, deadline), ignore)
            if found is not None:
                return found
            if time.monotonic() >= deadline:
                raise errors.Timeout(f"no new turn in {swarm}/{instance_key}/{agent} after {timeout:g} s")
            await asyncio.sleep(TURN_POLL_INTERVAL)

    async def _get_instance_or_none(
        self, swarm: str, instance_key: str, agent: str, deadline: float
    ) -> Instance | None:
        try:
            return await self._run(core.get_instance(swarm, instance_key, agent), deadline + core.DEADLINE_GRACE)
        except errors.NotFound:
            return None

    async def follow_turn(
        self, swarm: str, instance_key: str, agent: str, turn_id: str, *, after: int | None = None
    ) -> AsyncIterator[TurnEvent]:
        """A turn's events as they happen, until it ends (``turn.completed``, ``turn.failed``,
        ``turn.interrupted``).

        Reads the Server-Sent Events route (on ``stream_url`` when given);
        after a dropped connection it reconnects with ``Last-Event-ID``
        (bounded backoff), and it never yields an event twice. Where streams
        are refused (406: API Gateway buffers), it polls the JSON form.
        """
        state = core.FollowState(after, self._settings.retry)
        while not state.done:
            if state.polling:
                try:
                    events = await self.turn_events(swarm, instance_key, agent, turn_id, after=state.last)
                except errors.AgentauthError as err:
                    # A poll that failed past its retries is a failed connection, in
                    # the same budget; a refusal (401, 404, …) is raised.
                    await asyncio.sleep(state.poll_failed(err))
                    continue
                state.failures = 0
                for event in events:
                    if state.accept(event):
                        yield event
                if not state.done:
                    await asyncio.sleep(POLL_INTERVAL)
                continue
            call = state.stream_call(swarm, instance_key, agent, turn_id)
            state.begin()
            undecodable = False
            try:
                auth = self._creds.auth(call.credential)
                request = core.build_request(self._http, self._settings, call)
                response = await self._http.send(request, auth=auth, stream=True)
                try:
                    if not response.is_success:
                        await response.aread()
                        state.refused(response)
                    elif not core.is_event_stream(response):
                        await response.aread()
                        for event in state.page(response):
                            yield event
                    else:
                        parser = core.SSEParser()
                        async for line in response.aiter_lines():
                            new = state.line(line, parser)
                            if new is not None:
                                yield new
                                if state.done:
                                    return
                        state.ended_cleanly = True
                finally:
                    await response.aclose()
            except httpx.TransportError:
                pass  # dropped, or silent past the read timeout: reconnect after the last seq yielded
            except httpx.DecodingError:
                undecodable = True
            if undecodable:  # raised here: httpx's exception, which holds the request, is not chained
                raise core.connection_error(call, httpx.DecodingError("the event stream cannot be decoded"))
            if not state.done and not state.polling:
                await asyncio.sleep(state.reconnect_delay())


class Client(_Base):
    """agentauth over ``httpx.Client``: the same surface as :class:`AsyncClient`, blocking."""

    def __init__(
        self,
        base_url: str | None = None,
        *,
        runtime_token: str | Secret | None = None,
        agent_token: str | Secret | Callable[[], str] | None = None,
        auth: str | None = None,
        stream_url: str | None = None,
        region: str | None = None,
        timeouts: Timeouts | None = None,
        retry: RetryPolicy | None = None,
        env: Mapping[str, str] | None = None,
        transport: httpx.BaseTransport | None = None,
        aws_credentials: AwsCredentials | None = None,
    ) -> None:
        super().__init__(
            base_url,
            runtime_token=runtime_token,
            agent_token=agent_token,
            auth=auth,
            stream_url=stream_url,
            region=region,
            timeouts=timeouts,
            retry=retry,
            env=env,
            aws_credentials=aws_credentials,
        )
        self._http = httpx.Client(transport=transport, follow_redirects=False, trust_env=transport is None)

    def __enter__(self: _C) -> _C:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _send(self, call: core.Call, deadline: float | None = None) -> httpx.Response:
        """Send call, again where :func:`agentauth._core.retry_delay` says it is safe;
        with a ``deadline`` (``time.monotonic()``), no attempt or wait goes past it."""
        policy = self._settings.retry
        attempt = 0
        while True:
            attempt += 1
            auth = self._creds.auth(call.credential)
            request = core.build_request(self._http, self._settings, call, deadline)
            outcome: httpx.Response | httpx.RequestError
            try:
                outcome = self._http.send(request, auth=auth)
            except httpx.RequestError as exc:  # a TransportError, or an answer httpx could not decode
                outcome = exc
            delay = core.retry_delay(policy, call, attempt, outcome, deadline)
            if delay is not None:
                time.sleep(delay)
                continue
            if isinstance(outcome, httpx.Response):
                return outcome
            # Raised here, not in the except block, and without the local:
            # httpx's exception holds the request, headers and all, and
            # travels neither chained to the error nor in its frames.
            error = core.connection_error(call, outcome)
            del outcome
            raise error

    def _run(self, op: Op[T], deadline: float | None = None) -> T:
        return op.parse(self._send(op.call, deadline))

    def get_access_token(
        self,
        app: str,
        *,
        subjects: Mapping[str, str] | None = None,
        scopes: Sequence[str] | None = None,
        min_ttl: float | timedelta | None = None,
        resume: ResumeTarget | None = None,
        actor: ActorLike = None,
        claims: Mapping[str, Any] | None = None,
        auth: AuthLike = None,
        origin: Mapping[str, Any] | None = None,
    ) -> AccessToken:
        """See :meth:`AsyncClient.get_access_token`."""
        return self._run(
            core.get_access_token(
                app,
                subjects=subjects,
                scopes=scopes,
                min_ttl=min_ttl,
                resume=resume,
                actor=actor,
                claims=claims,
                auth=auth,
                origin=origin,
            )
        )

    def authorization_status(self, session_id: str, *, wait: int | None = None) -> AuthSessionStatus:
        return self._run(core.authorization_status(session_id, wait, self._settings.timeouts))

    def wait_for_authorization(
        self, session: str | errors.AuthorizationRequired, timeout: float = 600.0
    ) -> AuthSessionStatus:
        """See :meth:`AsyncClient.wait_for_authorization`."""
        sid = core.session_id_of(session)
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            wait = max(0, min(core.MAX_WAIT_CHUNK, math.floor(remaining)))
            started = time.monotonic()
            op = core.authorization_status(sid, wait, self._settings.timeouts)
            try:
                # Retries and timeouts within the deadline: a lost long poll is not sent again past it.
                status = self._run(op, deadline + core.DEADLINE_GRACE)
            except errors.Timeout:
                if time.monotonic() < deadline:
                    raise
                status = None
            if status is not None and status.settled:
                return core.settle(status)
            if time.monotonic() >= deadline:
                raise errors.AuthorizationTimeout(
                    f"auth session {sid} still {status.status if status else 'pending'} after {timeout:g} s",
                    session_id=sid,
                )
            if time.monotonic() - started < 1:
                time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))

    def pending_authorizations(self, swarm: str, instance_key: str, agent: str) -> list[PendingAuthorization]:
        return self._run(core.pending(ResumeTarget(swarm, instance_key, agent)))

    def revoke(self, app: str, subject: str) -> RevokeResult:
        return self._run(core.revoke(app, subject))

    def list_tools(self) -> list[ToolManifestEntry]:
        return self._run(core.list_tools())

    def search_skills(self, query: str, *, top_k: int | None = None) -> list[Skill]:
        return self._run(core.search_skills(query, top_k))

    def invoke_tool(
        self, tool_name: str, args: Mapping[str, Any] | None = None, *, call_id: str | None = None
    ) -> ToolInvocation:
        return self._run(core.invoke_tool(tool_name, args, call_id))

    def post_event(
        self,
        swarm: str,
        instance_key: str,
        text: str | None = None,
        *,
        auth: AuthLike,
        origin: Mapping[str, Any] | None = None,
        id: str | None = None,
        type: str | None = None,
        agent: str | None = None,
        properties: Mapping[str, str] | None = None,
    ) -> PostedEvent:
        """See :meth:`AsyncClient.post_event`."""
        return self._run(
            core.post_event(
                swarm,
                instance_key,
                text=text,
                auth=auth,
                origin=origin,
                id=id,
                type=type,
                agent=agent,
                properties=properties,
            )
        )

    def list_instances(self) -> InstanceList:
        """See :meth:`AsyncClient.list_instances`."""
        return self._run(core.list_instances())

    def get_instance(self, swarm: str, instance_key: str, agent: str) -> Instance:
        return self._run(core.get_instance(swarm, instance_key, agent))

    def pause_instance(self, swarm: str, instance_key: str, agent: str) -> InstanceRecord:
        return self._run(core.lifecycle(swarm, instance_key, agent, "pause"))

    def resume_instance(self, swarm: str, instance_key: str, agent: str) -> InstanceRecord:
        """See :meth:`AsyncClient.resume_instance`."""
        return self._run(core.lifecycle(swarm, instance_key, agent, "resume"))

    def terminate_instance(
        self, swarm: str, instance_key: str, agent: str, reason: str | None = None
    ) -> InstanceRecord:
        return self._run(core.lifecycle(swarm, instance_key, agent, "terminate", reason))

    def delete_instance(self, swarm: str, instance_key: str, agent: str) -> InstanceDeleted:
        return self._run(core.delete_instance(swarm, instance_key, agent))

    def turn_events(
        self, swarm: str, instance_key: str, agent: str, turn_id: str, *, after: int | None = None
    ) -> list[TurnEvent]:
        return self._run(core.turn_events(swarm, instance_key, agent, turn_id, after))

    def wait_for_turn(
        self, swarm: str, instance_key: str, agent: str, *, ignore: Collection[str] = (), timeout: float = 30.0
    ) -> TurnSummary:
        """See :meth:`AsyncClient.wait_for_turn`."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                detail: Instance | None = self._run(
                    core.get_instance(swarm, instance_key, agent), deadline + core.DEADLINE_GRACE
                )
            except errors.NotFound:
                detail = None
            found = _new_turn(detail, ignore)
            if found is not None:
                return found
            if time.monotonic() >= deadline:
                raise errors.Timeout(f"no new turn in {swarm}/{instance_key}/{agent} after {timeout:g} s")
            time.sleep(TURN_POLL_INTERVAL)

    def follow_turn(
        self, swarm: str, instance_key: str, agent: str, turn_id: str, *, after: int | None = None
    ) -> Iterator[TurnEvent]:
        """See :meth:`AsyncClient.follow_turn`."""
        state = core.FollowState(after, self._settings.retry)
        while not state.done:
            if state.polling:
                try:
                    events = self.turn_events(swarm, instance_key, agent, turn_id, after=state.last)
                except errors.AgentauthError as err:
                    # A poll that failed past its retries is a failed connection, in
                    # the same budget; a refusal (401, 404, …) is raised.
                    time.sleep(state.poll_failed(err))
                    continue
                state.failures = 0
                for event in events:
                    if state.accept(event):
                        yield event
                if not state.done:
                    time.sleep(POLL_INTERVAL)
                continue
            call = state.stream_call(swarm, instance_key, agent, turn_id)
            state.begin()
            undecodable = False
            try:
                auth = self._creds.auth(call.credential)
                request = core.build_request(self._http, self._settings, call)
                response = self._http.send(request, auth=auth, stream=True)
                try:
                    if not response.is_success:
                        response.read()
                        state.refused(response)
                    elif not core.is_event_stream(response):
                        response.read()
                        yield from state.page(response)
                    else:
                        parser = core.SSEParser()
                        for line in response.iter_lines():
                            new = state.line(line, parser)
                            if new is not None:
                                yield new
                                if state.done:
                                    return
                        state.ended_cleanly = True
                finally:
                    response.close()
            except httpx.TransportError:
                pass
            except httpx.DecodingError:
                undecodable = True
            if undecodable:
                raise core.connection_error(call, httpx.DecodingError("the event stream cannot be decoded"))
            if not state.done and not state.polling:
                time.sleep(state.reconnect_delay())


def _new_turn(detail: Instance | None, ignore: Collection[str]) -> TurnSummary | None:
    if detail is None:
        return None
    if detail.active_turn is not None and detail.active_turn.id not in ignore:
        return detail.active_turn
    for summary in detail.recent_turns:  # newest first
        if summary.id not in ignore:
            return summary
    return None
