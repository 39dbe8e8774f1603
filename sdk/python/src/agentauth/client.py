"""The clients: :class:`AsyncClient` (httpx.AsyncClient, for agent runtimes)
and :class:`Client` (httpx.Client), one surface.

Both only send the requests :mod:`agentauth._core` builds and read the
answers it parses; what differs is the I/O (``await`` or not) and how they
sleep. Every request has a timeout; safe requests are retried
(:func:`agentauth._core.retry_delay` says which).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Callable, Collection, Generator, Mapping, Sequence
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
        # A base_url's user:pass@ stays out (as it does out of every error).
        return f"{type(self).__name__}(base_url={core.redact_url(self.base_url)!r}, auth={self._settings.auth!r})"


class AsyncClient(_Base):
    """agentauth over ``httpx.AsyncClient``.

    Arguments override the environment: ``base_url`` (``AGENTAUTH_URL``,
    default ``http://127.0.0.1:8080``), ``runtime_token``
    (``AGENTAUTH_RUNTIME_TOKEN``), ``agent_token`` (``AGENTAUTH_AGENT_TOKEN``;
    a callable, or a coroutine function, is asked on every request), ``auth`` (``AGENTAUTH_AUTH``:
    ``token`` or ``sigv4``), ``stream_url`` (``AGENTAUTH_STREAM_URL``) and
    ``region`` (``AWS_REGION``): ``help(AsyncClient.__init__)`` says more.
    Use it as ``async with AsyncClient() as c:`` or call :meth:`aclose`.
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
        """Where agentauth is and which credentials to use.

        Each argument left out (None) is read from the environment variable
        named with it. Use it as ``async with AsyncClient() as client:``, or
        call :meth:`aclose`.

        Args:
            base_url: agentauth's address (``AGENTAUTH_URL``; default
                ``http://127.0.0.1:8080``, ``make run``'s). On AWS, the stack's ``ApiUrl``.
            runtime_token: ``agentauth serve``'s runtime token
                (``AGENTAUTH_RUNTIME_TOKEN``; ``agentauth runtime-token`` prints
                it): the OAuth routes (``get_access_token``, …) and the turn
                routes (``post_event``, ``follow_turn``, …).
            agent_token: an agent JWT from your identity provider
                (``AGENTAUTH_AGENT_TOKEN``): the tool routes (``list_tools``,
                ``search_skills``, ``invoke_tool``). A JWT expires (``make
                run``'s after 1 h): a callable (or a coroutine function) is
                asked on every request, for a JWT that renews.
            auth: ``"token"`` (default: the runtime token) or ``"sigv4"``: the
                AWS deployment, whose runtime routes IAM authorizes
                (``AGENTAUTH_AUTH``; the ``aws`` extra).
            stream_url: on AWS, the turn function's URL (``TurnStreamUrl``), where
                live turn events stream from (``AGENTAUTH_STREAM_URL``; default:
                ``base_url``).
            region: the region SigV4 signs for (``AWS_REGION``, else ``AWS_DEFAULT_REGION``).
            timeouts: :class:`~agentauth.Timeouts`, in seconds (default: connect 5,
                read 30, a tool call 45, a silent stream 45).
            retry: :class:`~agentauth.RetryPolicy` (default: 4 tries with backoff,
                a ``Retry-After`` of up to 60 s honoured).
            env: the mapping read instead of ``os.environ``.
            transport: an ``httpx.AsyncBaseTransport`` to send through (tests,
                a proxy of yours).
            aws_credentials: SigV4's credentials (default: botocore's standard chain).

        Raises:
            AgentauthError: ``invalidConfiguration``: a URL that is not http(s),
                an ``auth`` other than ``token`` and ``sigv4``. A missing
                credential is raised (``MissingCredential``) by the first call
                of a route that needs it, before anything is sent.
        """
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
                foreign = core.foreign_answer(outcome, self._settings, call.credential)
                if foreign is not None:  # another server at the address: not a bare NotFound
                    raise foreign
                return outcome
            # Raised here, not in the except block, and without the local:
            # httpx's exception holds the request, headers and all, and
            # travels neither chained to the error nor in its frames.
            error = core.connection_error(call, outcome, self._settings)
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
        must consent first (its ``authorization_url`` is the link to show
        them; :meth:`wait_for_authorization` waits for it), or the error
        result's typed error (``ScopeNotAllowed``, ``RefreshFailed``, …).
        Takes the runtime token (or SigV4).

        Args:
            app: the OAuthApp of the bundle.
            subjects: whose grant: ``{"user": "<subject>"}`` for a per-user
                app, ``{"global": …}`` for a shared one — the OAuth subject your
                runtime vouches for.
            scopes: fewer scopes than the app's (default: all of them).
            min_ttl: the least life, in seconds (or a ``timedelta``), the token
                must have left; default 300 (the server's).
            resume: the agent instance (:class:`~agentauth.ResumeTarget`) an
                ``auth.granted`` event wakes once the user consents.
            actor: who asks (``TurnAuth.actor``): an :class:`~agentauth.Actor`,
                a user id (``str``) or its JSON. With ``resume``, the woken turn
                acts for it.
            claims: the user's verified claims (``{"sub": …, "scope": …}``):
                the tenant a claim names, and with ``resume`` the woken turn's
                access policies, are read from them.
            auth: the same as one :class:`~agentauth.TurnAuth` (``actor``,
                ``subjects``, ``claims``; a ``post_event``'s may be passed as it
                is); ``subjects``, ``actor`` and ``claims`` given as well replace its.
            origin: where the request came from (``{"connector": …, "channel":
                …}``): with ``resume``, where the resumed turn's outcome goes.
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
        ``AuthorizationTimeout`` when it is still pending after ``timeout``
        seconds (default 600: 10 minutes). ``session`` is the
        ``AuthorizationRequired`` raised, or its ``session_id``.
        """
        wait = core.AuthWait(session, timeout, self._settings.timeouts)
        while True:
            try:
                status = await self._run(wait.poll(), wait.send_deadline)
            except errors.Timeout:
                if not wait.expired():
                    raise
                status = None
            settled = wait.answered(status)
            if settled is not None:
                return settled
            pause = wait.pause()
            if pause:
                await asyncio.sleep(pause)

    async def pending_authorizations(self, swarm: str, instance_key: str, agent: str) -> list[PendingAuthorization]:
        """The consents an agent instance waits for, with their links (``auth.pending``)."""
        return await self._run(core.pending(ResumeTarget(swarm, instance_key, agent)))

    async def revoke(self, app: str, subject: str) -> RevokeResult:
        """Revoke ``subject``'s grant of ``app`` (at the provider too when it has a revokeUrl);
        ``GrantNotFound`` when there is none."""
        return await self._run(core.revoke(app, subject))

    # --- tools ---

    async def list_tools(self) -> list[ToolManifestEntry]:
        """The tools the agent JWT's claims may see (the manifest).

        Takes the agent JWT (``agent_token`` / ``AGENTAUTH_AGENT_TOKEN``), not the runtime token."""
        return await self._run(core.list_tools())

    async def search_skills(self, query: str, *, top_k: int | None = None) -> list[Skill]:
        """The skills the agent may read that match a word of ``query``, best first
        (at most ``top_k``; the server's default without it).

        Takes the agent JWT (``agent_token`` / ``AGENTAUTH_AGENT_TOKEN``), not the runtime token."""
        return await self._run(core.search_skills(query, top_k))

    async def invoke_tool(
        self, tool_name: str, args: Mapping[str, Any] | None = None, *, call_id: str | None = None
    ) -> ToolInvocation:
        """Call a tool through agentauth's tool hooks. Raises ``AuthorizationRequired`` when
        the tool's OAuth app needs the user's consent; a tool's error is a result.

        Takes the agent JWT (``agent_token`` / ``AGENTAUTH_AGENT_TOKEN``), not the
        runtime token. Never sent twice (the tool may have acted); its answer
        is waited for ``Timeouts.read`` + 15 s (45 s by default)."""
        return await self._run(core.invoke_tool(tool_name, args, call_id, self._settings.timeouts))

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
        """The instance, flat: its record's fields (``swarm``, ``instance_key``, ``agent``,
        ``status``, …) beside its ``active_turn``, ``backlog`` and ``recent_turns`` (newest first)."""
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
        self,
        swarm: str,
        instance_key: str,
        agent: str,
        *,
        event_id: str | None = None,
        ignore: Collection[str] = (),
        timeout: float = 60.0,
    ) -> TurnSummary:
        """The turn of a posted event, once the worker has started it.

        With ``event_id`` (``posted.event_id``, what :meth:`post_event`
        answered): the turn whose ``input_event_id`` is that id — never
        another, though the instance's newest turn may still be an earlier
        message's while this one waits in the backlog (a parked turn ahead of
        it, a paused instance, a busy worker). Without it: the instance's
        newest turn whose id is not in ``ignore``. Raises
        :class:`~agentauth.errors.Timeout` after ``timeout`` seconds (default
        60), its requests and their retries included.
        """
        wait = core.TurnWait(swarm, instance_key, agent, event_id, ignore, timeout)
        while True:
            try:
                detail: Instance | None = await self._run(wait.op, wait.send_deadline)
            except errors.NotFound:
                detail = None
            found = wait.found(detail)
            if found is not None:
                return found
            await asyncio.sleep(TURN_POLL_INTERVAL)

    async def follow_turn(
        self, swarm: str, instance_key: str, agent: str, turn_id: str, *, after: int | None = None
    ) -> AsyncGenerator[TurnEvent, None]:
        """A turn's events as they happen, until it ends (``turn.completed``, ``turn.failed``,
        ``turn.interrupted``).

        Reads the Server-Sent Events route (on ``stream_url`` when given);
        after a dropped connection it reconnects with ``Last-Event-ID``
        (bounded backoff), and it never yields an event twice. Where streams
        are refused (406: API Gateway buffers), it polls the JSON form.

        To leave it before the turn ends (a ``break``, an exception), use
        ``async with contextlib.aclosing(client.follow_turn(…)) as events:``:
        its connection is closed there, not when the generator is collected.
        """
        state = core.FollowState(after, self._settings)
        while not state.done:
            if state.polling:
                try:
                    events = await self.turn_events(swarm, instance_key, agent, turn_id, after=state.last)
                except errors.AgentauthError as err:
                    # A poll that failed past its retries is a failed connection, in
                    # the same budget; a refusal (401, 404, …) is raised.
                    await asyncio.sleep(state.poll_failed(err))
                    continue
                for event in state.polled(events):
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
                        state.ended(parser)
                finally:
                    await response.aclose()
            except httpx.TransportError:
                pass  # dropped, or silent past the read timeout: reconnect after the last seq yielded
            except httpx.DecodingError:
                undecodable = True
            if undecodable:  # raised here: httpx's exception, which holds the request, is not chained
                raise core.connection_error(
                    call, httpx.DecodingError("the event stream cannot be decoded"), self._settings
                )
            if not state.done and not state.polling:
                await asyncio.sleep(state.reconnect_delay())


class Client(_Base):
    """agentauth over ``httpx.Client``: the same surface as :class:`AsyncClient`, blocking.

    ``help(Client.__init__)`` lists its arguments and the environment variables
    they override. Use it as ``with Client() as client:`` or call :meth:`close`.
    """

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
        """Where agentauth is and which credentials to use.

        Each argument left out (None) is read from the environment variable
        named with it. Use it as ``with Client() as client:``, or call :meth:`close`.

        Args:
            base_url: agentauth's address (``AGENTAUTH_URL``; default
                ``http://127.0.0.1:8080``, ``make run``'s). On AWS, the stack's ``ApiUrl``.
            runtime_token: ``agentauth serve``'s runtime token
                (``AGENTAUTH_RUNTIME_TOKEN``; ``agentauth runtime-token`` prints
                it): the OAuth routes (``get_access_token``, …) and the turn
                routes (``post_event``, ``follow_turn``, …).
            agent_token: an agent JWT from your identity provider
                (``AGENTAUTH_AGENT_TOKEN``): the tool routes (``list_tools``,
                ``search_skills``, ``invoke_tool``). A JWT expires (``make
                run``'s after 1 h): a callable is asked on every request, for a JWT that renews.
            auth: ``"token"`` (default: the runtime token) or ``"sigv4"``: the
                AWS deployment, whose runtime routes IAM authorizes
                (``AGENTAUTH_AUTH``; the ``aws`` extra).
            stream_url: on AWS, the turn function's URL (``TurnStreamUrl``), where
                live turn events stream from (``AGENTAUTH_STREAM_URL``; default:
                ``base_url``).
            region: the region SigV4 signs for (``AWS_REGION``, else ``AWS_DEFAULT_REGION``).
            timeouts: :class:`~agentauth.Timeouts`, in seconds (default: connect 5,
                read 30, a tool call 45, a silent stream 45).
            retry: :class:`~agentauth.RetryPolicy` (default: 4 tries with backoff,
                a ``Retry-After`` of up to 60 s honoured).
            env: the mapping read instead of ``os.environ``.
            transport: an ``httpx.BaseTransport`` to send through (tests, a proxy of yours).
            aws_credentials: SigV4's credentials (default: botocore's standard chain).

        Raises:
            AgentauthError: ``invalidConfiguration``: a URL that is not http(s),
                an ``auth`` other than ``token`` and ``sigv4``. A missing
                credential is raised (``MissingCredential``) by the first call
                of a route that needs it, before anything is sent.
        """
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
                foreign = core.foreign_answer(outcome, self._settings, call.credential)
                if foreign is not None:  # another server at the address: not a bare NotFound
                    raise foreign
                return outcome
            # Raised here, not in the except block, and without the local:
            # httpx's exception holds the request, headers and all, and
            # travels neither chained to the error nor in its frames.
            error = core.connection_error(call, outcome, self._settings)
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
        wait = core.AuthWait(session, timeout, self._settings.timeouts)
        while True:
            try:
                status = self._run(wait.poll(), wait.send_deadline)
            except errors.Timeout:
                if not wait.expired():
                    raise
                status = None
            settled = wait.answered(status)
            if settled is not None:
                return settled
            pause = wait.pause()
            if pause:
                time.sleep(pause)

    def pending_authorizations(self, swarm: str, instance_key: str, agent: str) -> list[PendingAuthorization]:
        return self._run(core.pending(ResumeTarget(swarm, instance_key, agent)))

    def revoke(self, app: str, subject: str) -> RevokeResult:
        return self._run(core.revoke(app, subject))

    def list_tools(self) -> list[ToolManifestEntry]:
        """The tools the agent JWT may see; takes the agent JWT. See :meth:`AsyncClient.list_tools`."""
        return self._run(core.list_tools())

    def search_skills(self, query: str, *, top_k: int | None = None) -> list[Skill]:
        """The skills the agent may read, best first; takes the agent JWT. See :meth:`AsyncClient.search_skills`."""
        return self._run(core.search_skills(query, top_k))

    def invoke_tool(
        self, tool_name: str, args: Mapping[str, Any] | None = None, *, call_id: str | None = None
    ) -> ToolInvocation:
        """Call a tool; takes the agent JWT. See :meth:`AsyncClient.invoke_tool`."""
        return self._run(core.invoke_tool(tool_name, args, call_id, self._settings.timeouts))

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
        """See :meth:`AsyncClient.get_instance`."""
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
        self,
        swarm: str,
        instance_key: str,
        agent: str,
        *,
        event_id: str | None = None,
        ignore: Collection[str] = (),
        timeout: float = 60.0,
    ) -> TurnSummary:
        """See :meth:`AsyncClient.wait_for_turn`: with ``event_id``, the turn of that event only."""
        wait = core.TurnWait(swarm, instance_key, agent, event_id, ignore, timeout)
        while True:
            try:
                detail: Instance | None = self._run(wait.op, wait.send_deadline)
            except errors.NotFound:
                detail = None
            found = wait.found(detail)
            if found is not None:
                return found
            time.sleep(TURN_POLL_INTERVAL)

    def follow_turn(
        self, swarm: str, instance_key: str, agent: str, turn_id: str, *, after: int | None = None
    ) -> Generator[TurnEvent, None, None]:
        """See :meth:`AsyncClient.follow_turn`; a generator (``contextlib.closing`` for leaving it early)."""
        state = core.FollowState(after, self._settings)
        while not state.done:
            if state.polling:
                try:
                    events = self.turn_events(swarm, instance_key, agent, turn_id, after=state.last)
                except errors.AgentauthError as err:
                    # A poll that failed past its retries is a failed connection, in
                    # the same budget; a refusal (401, 404, …) is raised.
                    time.sleep(state.poll_failed(err))
                    continue
                yield from state.polled(events)
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
                        state.ended(parser)
                finally:
                    response.close()
            except httpx.TransportError:
                pass
            except httpx.DecodingError:
                undecodable = True
            if undecodable:
                raise core.connection_error(
                    call, httpx.DecodingError("the event stream cannot be decoded"), self._settings
                )
            if not state.done and not state.polling:
                time.sleep(state.reconnect_delay())
