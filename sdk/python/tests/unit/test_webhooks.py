"""verify_webhook: the recipe of docs/turns.md, each failed check told apart."""

from __future__ import annotations

import hashlib
import hmac
import json

import pytest

import agentauth
from agentauth import errors

SECRET = b"a-connector-secret-of-32-bytes!!"
NOW = 1_790_000_000
BODY = json.dumps(
    {
        "connector": "chat-ui",
        "swarm": "default",
        "instanceKey": "1712345678.000100",
        "agent": "assistant",
        "turnId": "turn-9a",
        "traceId": "4bf9",
        "event": {
            "type": "turn.completed",
            "seq": 8,
            "at": "2026-11-24T10:00:09Z",
            "data": {"final": "You are alice."},
        },
        "origin": {"connector": "chat-ui", "channel": "C123"},
    }
).encode()


def sign(secret: bytes, ts: str, body: bytes) -> str:
    return "v1=" + hmac.new(secret, ts.encode() + b"." + body, hashlib.sha256).hexdigest()


def test_a_signed_delivery_verifies_and_parses() -> None:
    ts = str(NOW)
    d = agentauth.verify_webhook(SECRET, ts, sign(SECRET, ts, BODY), BODY, now=NOW + 10)
    assert d.delivery_key == "turn-9a:8"
    assert d.event.type == "turn.completed" and d.event.data["final"] == "You are alice."
    assert d.origin == {"connector": "chat-ui", "channel": "C123"}
    assert (d.connector, d.swarm, d.instance_key, d.agent) == ("chat-ui", "default", "1712345678.000100", "assistant")


def test_headers_form_in_any_case() -> None:
    ts = str(NOW)
    headers = {"x-agentauth-timestamp": ts, "X-AGENTAUTH-SIGNATURE": sign(SECRET, ts, BODY)}
    assert agentauth.verify_webhook_headers(SECRET.decode(), headers, BODY, now=NOW).delivery_key == "turn-9a:8"


@pytest.mark.parametrize(
    ("case", "secret", "ts", "body", "now", "cls"),
    [
        (
            "one byte of the body changed",
            SECRET,
            str(NOW),
            BODY.replace(b"alice", b"alicf"),
            NOW,
            errors.WebhookBadSignature,
        ),
        ("another secret", b"another-secret", str(NOW), BODY, NOW, errors.WebhookBadSignature),
        ("an old timestamp", SECRET, str(NOW - 301), BODY, NOW, errors.WebhookTooOld),
        ("a timestamp from the future", SECRET, str(NOW + 301), BODY, NOW, errors.WebhookTooOld),
        ("a timestamp that is not a number", SECRET, "12a", BODY, NOW, errors.WebhookMalformed),
    ],
)
def test_refusals(case: str, secret: bytes, ts: str, body: bytes, now: int, cls: type[Exception]) -> None:
    # agentauth signed BODY at ts with SECRET; the receiver checks with `secret` what it got.
    signature = sign(SECRET, ts, BODY)
    with pytest.raises(cls):
        agentauth.verify_webhook(secret, ts, signature, body, now=now)


def test_malformed_signature_and_missing_headers() -> None:
    ts = str(NOW)
    for sig in (None, "", "v2=" + "0" * 64, "v1=abc", sign(SECRET, ts, BODY).upper()):
        with pytest.raises(errors.WebhookVerificationError):
            agentauth.verify_webhook(SECRET, ts, sig, BODY, now=NOW)
    with pytest.raises(errors.WebhookMalformed):
        agentauth.verify_webhook_headers(SECRET, {}, BODY, now=NOW)


def test_a_signed_body_that_is_not_a_delivery_is_malformed() -> None:
    ts = str(NOW)
    body = b'{"hello": 1}'
    with pytest.raises(errors.WebhookMalformed):
        agentauth.verify_webhook(SECRET, ts, sign(SECRET, ts, body), body, now=NOW)


def test_tolerance_is_a_parameter() -> None:
    ts = str(NOW - 100)
    with pytest.raises(errors.WebhookTooOld):
        agentauth.verify_webhook(SECRET, ts, sign(SECRET, ts, BODY), BODY, tolerance=60, now=NOW)
    assert agentauth.verify_webhook(SECRET, ts, sign(SECRET, ts, BODY), BODY, tolerance=120, now=NOW)


def test_checks_are_named_as_in_the_typescript_sdk() -> None:
    ts = str(NOW)
    cases = [
        ("12a", sign(SECRET, ts, BODY), BODY, "malformed_timestamp"),
        (ts, "v1=nothex", BODY, "malformed_signature"),
        (str(NOW - 999), sign(SECRET, str(NOW - 999), BODY), BODY, "timestamp_out_of_window"),
        (ts, sign(b"other", ts, BODY), BODY, "signature_mismatch"),
        (ts, sign(SECRET, ts, b"[]"), b"[]", "malformed_body"),
    ]
    for timestamp, signature, body, check in cases:
        with pytest.raises(errors.WebhookVerificationError) as info:
            agentauth.verify_webhook(SECRET, timestamp, signature, body, now=NOW)
        assert info.value.check == check and info.value.code == check
