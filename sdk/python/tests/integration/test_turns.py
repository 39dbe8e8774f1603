"""Turns (sdk/TESTING.md, 3 and 4): a turn followed live through the
harness's proxy — parked, the connection cut, consent, resumed, completed,
with every seq exactly once; the lifecycle on an instance of its own; the
turn's webhook deliveries verified, and tampered ones refused."""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import time
from typing import Any

import httpx
import pytest

import agentauth
from agentauth import errors

from .conftest import Contract, Harness, unique

# What the follow test leaves for the webhook test (same module, run after it).
FOLLOWED: dict[str, Any] = {}


class CountingTransport(httpx.AsyncBaseTransport):
    """Records each request's Last-Event-ID: the proof that follow_turn() reconnected by itself."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.streams: list[str | None] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.headers.get("Accept") == "text/event-stream":
            self.streams.append(request.headers.get("Last-Event-ID"))
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_turn_followed_through_park_drop_consent_completion(contract: Contract, harness: Harness) -> None:
    login = unique("py-turn")
    key = unique("py-turn")
    auth = agentauth.TurnAuth.for_user(contract.subject(login), claims=contract.claims)
    origin = {"connector": contract.connector, "thread": key} if contract.connector else {"thread": key}
    transport = CountingTransport()
    # The stream goes through the harness's proxy, whose connections /drop cuts.
    async with agentauth.AsyncClient(stream_url=contract.proxy_url, transport=transport) as client:
        message_id = unique("msg")
        posted = await client.post_event(contract.swarm, key, "who am I?", auth=auth, origin=origin, id=message_id)
        assert posted.agent == contract.agent
        # Posting the same id again (a retry) queues nothing new.
        again = await client.post_event(contract.swarm, key, "who am I?", auth=auth, origin=origin, id=message_id)
        assert again.event_id == posted.event_id

        turn = await client.wait_for_turn(contract.swarm, key, posted.agent, event_id=posted.event_id)
        assert turn.input_event_id == posted.event_id
        events: list[agentauth.TurnEvent] = []
        dropped = 0
        async for event in client.follow_turn(contract.swarm, key, posted.agent, turn.id):
            events.append(event)
            if event.type == "turn.parked":
                url = event.data["authorizationUrl"]
                pending = await client.pending_authorizations(contract.swarm, key, posted.agent)
                assert [p.authorization_url for p in pending] == [url]
                dropped = harness.drop()  # cut the live stream mid-way
                harness.consent(url, login)

    seqs = [e.seq for e in events]
    types = [e.type for e in events]
    assert seqs == list(range(len(seqs))), f"seqs {seqs}: want 0, 1, 2, … with no gap and no repeat"
    assert types[0] == "turn.started" and types[-1] == "turn.completed", types
    assert "turn.parked" in types and "turn.resumed" in types
    assert dropped >= 1, "POST /drop cut no connection: the stream was not open through the proxy"
    assert len(transport.streams) >= 2, "follow_turn() did not reconnect after the drop"
    assert transport.streams[0] is None
    assert all(last is not None and last.isdigit() for last in transport.streams[1:]), transport.streams
    final = events[-1].data.get("final", "")
    assert final.startswith("You are "), final

    detail = None
    async with agentauth.AsyncClient() as client:
        detail = await client.get_instance(contract.swarm, key, posted.agent)
        again_events = await client.turn_events(contract.swarm, key, posted.agent, turn.id, after=2)
    assert detail.recent_turns[0].id == turn.id and detail.recent_turns[0].status == "completed"
    assert [e.seq for e in again_events] == seqs[3:]
    FOLLOWED.update(turn_id=turn.id, seqs=seqs)


async def test_lifecycle(client: agentauth.AsyncClient, contract: Contract) -> None:
    key = unique("py-life")
    # No one: the agent sees no tool; the turn runs, parks on nothing and ends.
    posted = await client.post_event(contract.swarm, key, "hello", auth=agentauth.TurnAuth())
    agent = posted.agent
    await client.wait_for_turn(contract.swarm, key, agent, event_id=posted.event_id)

    assert (await client.pause_instance(contract.swarm, key, agent)).status == "paused"
    detail = await client.get_instance(contract.swarm, key, agent)
    # The route's answer, flat: the record's fields beside the turns (as the TypeScript SDK's Instance).
    assert (detail.swarm, detail.instance_key, detail.agent, detail.status) == (contract.swarm, key, agent, "paused")
    assert detail.created_at is not None and detail.updated_at is not None and detail.updated_at >= detail.created_at
    assert detail.recent_turns and all(isinstance(t, agentauth.TurnSummary) for t in detail.recent_turns)
    listed = await client.list_instances()
    assert any(i.instance_key == key for i in listed.data) and isinstance(listed.unreadable, tuple)
    assert (await client.resume_instance(contract.swarm, key, agent)).status == "active"
    terminated = await client.terminate_instance(contract.swarm, key, agent, reason="the sdk test is done")
    assert terminated.status == "terminated"
    with pytest.raises(errors.InstanceTerminated) as info:
        await client.post_event(contract.swarm, key, "still there?", auth=agentauth.TurnAuth())
    assert info.value.status == 409 and info.value.request_id
    with pytest.raises(errors.InstanceTerminated):
        await client.pause_instance(contract.swarm, key, agent)

    deleted = await client.delete_instance(contract.swarm, key, agent)
    assert deleted.deleted and deleted.oauth_grants_kept
    with pytest.raises(errors.NotFound):
        await client.get_instance(contract.swarm, key, agent)


async def test_the_turn_of_a_message_is_found_by_its_event_id_not_as_the_newest(
    client: agentauth.AsyncClient, contract: Contract
) -> None:
    """The newcomer's race, made certain: a message posted to a paused
    instance waits in its backlog while the newest turn is an earlier
    message's; wait_for_turn(event_id=…) waits for the turn of this one."""
    key = unique("py-event")
    first = await client.post_event(contract.swarm, key, "hello", auth=agentauth.TurnAuth())
    agent = first.agent
    turn1 = await client.wait_for_turn(contract.swarm, key, agent, event_id=first.event_id)
    assert turn1.input_event_id == first.event_id
    assert [e async for e in client.follow_turn(contract.swarm, key, agent, turn1.id)][-1].terminal

    await client.pause_instance(contract.swarm, key, agent)
    second = await client.post_event(contract.swarm, key, "hello again", auth=agentauth.TurnAuth())
    assert second.event_id != first.event_id
    # The newest turn is still the first message's: what a wait without event_id returns.
    assert (await client.wait_for_turn(contract.swarm, key, agent, timeout=5)).id == turn1.id
    with pytest.raises(errors.Timeout, match=re.escape(f"no turn of event {second.event_id}")):
        await client.wait_for_turn(contract.swarm, key, agent, event_id=second.event_id, timeout=1)

    await client.resume_instance(contract.swarm, key, agent)
    turn2 = await client.wait_for_turn(contract.swarm, key, agent, event_id=second.event_id)
    assert turn2.id != turn1.id and turn2.input_event_id == second.event_id
    assert [e async for e in client.follow_turn(contract.swarm, key, agent, turn2.id)][-1].terminal
    await client.delete_instance(contract.swarm, key, agent)


def test_lifecycle_sync(sync_client: agentauth.Client, contract: Contract) -> None:
    key = unique("py-life-sync")
    posted = sync_client.post_event(contract.swarm, key, "hello", auth=agentauth.TurnAuth())
    turn = sync_client.wait_for_turn(contract.swarm, key, posted.agent, event_id=posted.event_id)
    assert turn.input_event_id == posted.event_id
    events = list(sync_client.follow_turn(contract.swarm, key, posted.agent, turn.id))
    assert [e.seq for e in events] == list(range(len(events)))
    assert events[-1].terminal
    assert sync_client.delete_instance(contract.swarm, key, posted.agent).deleted


def _sign(secret: bytes, ts: str, body: bytes) -> str:
    return "v1=" + hmac.new(secret, ts.encode() + b"." + body, hashlib.sha256).hexdigest()


def test_webhook_deliveries_verify_and_tampered_ones_are_refused(contract: Contract, harness: Harness) -> None:
    if not contract.connector or not contract.webhook_secret:
        pytest.skip("no connector here (AGENTAUTH_TEST_CONNECTOR unset: the AWS run)")
    if "turn_id" not in FOLLOWED:
        pytest.fail("the followed turn's test did not complete: no turn to check the deliveries of")
    secret = contract.webhook_secret.encode()
    turn_id = FOLLOWED["turn_id"]

    ours: list[tuple[dict[str, str], bytes, agentauth.WebhookDelivery]] = []
    deadline = time.monotonic() + 15  # a delivery is sent after its event is stored
    while time.monotonic() < deadline:
        ours = []
        for d in harness.deliveries(contract.connector):
            body = d["body"].encode()
            delivery = agentauth.verify_webhook_headers(secret, d["headers"], body)
            if delivery.turn_id == turn_id:
                ours.append((d["headers"], body, delivery))
        if {"turn.parked", "turn.completed"} <= {x[2].event.type for x in ours}:
            break
        time.sleep(0.2)
    kinds = {x[2].event.type for x in ours}
    assert {"turn.parked", "turn.completed"} <= kinds, f"deliveries of turn {turn_id}: {sorted(kinds)}"
    for _, _, delivery in ours:
        assert delivery.connector == contract.connector
        assert delivery.delivery_key == f"{turn_id}:{delivery.event.seq}"
        assert delivery.event.seq in FOLLOWED["seqs"]
        assert delivery.origin.get("connector") == contract.connector

    headers, body, delivery = next(x for x in ours if x[2].event.type == "turn.completed")
    ts = headers["X-Agentauth-Timestamp"]
    sig = headers["X-Agentauth-Signature"]
    tampered = bytearray(body)
    i = body.index(b"You are") + 4
    tampered[i] ^= 0x01
    with pytest.raises(errors.WebhookBadSignature):
        agentauth.verify_webhook(secret, ts, sig, bytes(tampered))
    with pytest.raises(errors.WebhookBadSignature):
        agentauth.verify_webhook(b"another-secret", ts, sig, body)
    # A replay: the same body signed with the right secret, but ten minutes ago.
    old = str(int(time.time()) - 600)
    with pytest.raises(errors.WebhookTooOld):
        agentauth.verify_webhook(secret, old, _sign(secret, old, body), body)
    # The real delivery itself, checked later than the window allows.
    with pytest.raises(errors.WebhookTooOld):
        agentauth.verify_webhook(secret, ts, sig, body, now=int(ts) + 301)


class StatusRecorder(httpx.AsyncBaseTransport):
    """Records (Accept, status) of each turn events request."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.seen: list[tuple[str, int]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        if request.url.path.endswith("/events") and "/turns/" in request.url.path:
            self.seen.append((request.headers.get("Accept", ""), response.status_code))
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_follow_polls_where_the_api_buffers(contract: Contract) -> None:
    """On AWS without the stream URL, API Gateway answers a stream request 406:
    follow_turn() reads the JSON form instead, and still ends at the turn's end."""
    if os.environ.get("AGENTAUTH_AUTH") != "sigv4":
        pytest.skip("agentauth serve streams on its own port: no 406 to fall back from")
    key = unique("py-poll")
    env = {k: v for k, v in os.environ.items() if k != "AGENTAUTH_STREAM_URL"}
    recorder = StatusRecorder()
    async with agentauth.AsyncClient(env=env, transport=recorder) as client:
        assert client.stream_url is None
        posted = await client.post_event(contract.swarm, key, "hello", auth=agentauth.TurnAuth())
        turn = await client.wait_for_turn(contract.swarm, key, posted.agent, event_id=posted.event_id)
        events = [e async for e in client.follow_turn(contract.swarm, key, posted.agent, turn.id)]
        await client.delete_instance(contract.swarm, key, posted.agent)
    assert [e.seq for e in events] == list(range(len(events)))
    assert events[-1].terminal
    assert recorder.seen[0] == ("text/event-stream", 406), recorder.seen
    assert all(status == 200 and accept == "application/json" for accept, status in recorder.seen[1:]), recorder.seen
