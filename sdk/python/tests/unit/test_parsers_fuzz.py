"""Parsers of untrusted input, fed random and mangled input: they answer or raise
their typed error, never anything else (a seeded, bounded fuzz)."""

from __future__ import annotations

import ast
import contextlib
import json
import random
import re
from pathlib import Path

import httpx

import agentauth
from agentauth import _core, errors

SEED = 20261128
ROUNDS = 2000


def mangle(rng: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.randint(0, 2)
        if op == 0 and b:
            b[rng.randrange(len(b))] = rng.randrange(256)
        elif op == 1 and b:
            del b[rng.randrange(len(b))]
        else:
            b.insert(rng.randrange(len(b) + 1), rng.randrange(256))
    return bytes(b)


def test_verify_webhook_never_raises_anything_else() -> None:
    rng = random.Random(SEED)
    body = json.dumps({"turnId": "t", "event": {"seq": 1, "type": "turn.completed"}}).encode()
    for _ in range(ROUNDS):
        ts = mangle(rng, b"1790000000").decode("latin-1")
        sig = mangle(rng, b"v1=" + b"a" * 64).decode("latin-1")
        with contextlib.suppress(errors.WebhookVerificationError):
            agentauth.verify_webhook(b"secret", ts, sig, mangle(rng, body), now=1_790_000_000)


def test_signed_garbage_is_malformed_not_a_crash() -> None:
    import hashlib
    import hmac

    rng = random.Random(SEED)
    base = json.dumps({"turnId": "t", "event": {"seq": 1, "type": "x", "data": {}}}).encode()
    for _ in range(ROUNDS):
        body = mangle(rng, base)
        sig = "v1=" + hmac.new(b"k", b"100." + body, hashlib.sha256).hexdigest()
        try:
            d = agentauth.verify_webhook(b"k", "100", sig, body, now=100)
            assert d.delivery_key == f"{d.turn_id}:{d.event.seq}"
        except errors.WebhookMalformed:
            pass


def test_sse_parser_and_follow_state_take_any_lines() -> None:
    rng = random.Random(SEED)
    stream = (
        "id: 0\nevent: turn.started\ndata: " + json.dumps({"turnId": "t", "seq": 0, "type": "turn.started"}) + "\n\n"
    )
    state = _core.FollowState(None, _core.Settings("http://127.0.0.1:8080", "token", None, None, None, None))
    parser = _core.SSEParser()
    messages = 0
    for _ in range(ROUNDS // 4):
        text = mangle(rng, stream.encode()).decode("utf-8", "replace")
        for line in text.split("\n"):
            msg = parser.feed(line)
            if msg is not None:
                messages += 1
                last = state.last
                with contextlib.suppress(errors.UnexpectedResponse):
                    event = state.message(msg)
                    # A new event moves the follow on; an old one is dropped, never yielded twice.
                    assert (event is None and state.last == last) or (
                        event is not None and event.seq == state.last > last
                    )
    assert messages > ROUNDS // 8, "the mangled streams must still reach the follow state"


def test_error_bodies_of_any_shape_are_typed() -> None:
    rng = random.Random(SEED)
    base = json.dumps({"error": {"code": "notFound", "message": "m", "requestId": "r", "details": {"a": 1}}}).encode()
    for _ in range(ROUNDS // 4):
        status = rng.choice([400, 401, 403, 404, 409, 429, 500, 502, 503, 418])
        response = httpx.Response(status, content=mangle(rng, base), request=httpx.Request("GET", "http://x/y"))
        err = _core.error_from_response(response)
        assert isinstance(err, errors.AgentauthError) and err.status == status


def test_readme_snippets_compile() -> None:
    """The integration suite runs them; here they must at least be Python (no harness needed)."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    snippets = re.findall(r"<!-- sdk test runs this: ([\w-]+) -->\n```python\n(.*?)```", readme, re.S)
    assert len(snippets) >= 8
    for name, code in snippets:
        compile(code, f"README.md[{name}]", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
