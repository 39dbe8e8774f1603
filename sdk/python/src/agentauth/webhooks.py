"""Verifying an origin delivery: the recipe of docs/turns.md (*Verifying a
delivery*) as a function.

agentauth signs each delivery with HMAC-SHA256, keyed with the connector's
secret, over ``<X-Agentauth-Timestamp>.<raw body>``, and sends
``X-Agentauth-Signature: v1=<lowercase hex>``. Check the signature over the
**raw** body before parsing it, refuse a timestamp outside the window (a
replay), then deduplicate on :attr:`WebhookDelivery.delivery_key` (the body's
``turnId`` and ``event.seq``, which the signature covers) — never on the
``X-Agentauth-Delivery`` header, which no signature covers.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import WebhookBadSignature, WebhookMalformed, WebhookTooOld
from .models import TurnEvent

__all__ = [
    "DEFAULT_TOLERANCE",
    "WEBHOOK_SIGNATURE_HEADER",
    "WEBHOOK_TIMESTAMP_HEADER",
    "WebhookDelivery",
    "verify_webhook",
    "verify_webhook_headers",
]

DEFAULT_TOLERANCE = 300

WEBHOOK_TIMESTAMP_HEADER = "X-Agentauth-Timestamp"
WEBHOOK_SIGNATURE_HEADER = "X-Agentauth-Signature"


@dataclass(frozen=True)
class WebhookDelivery:
    """A verified delivery: which turn, which event, and the ``origin`` you posted."""

    connector: str
    swarm: str
    instance_key: str
    agent: str
    turn_id: str
    trace_id: str
    event: TurnEvent
    origin: dict[str, Any]
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def delivery_key(self) -> str:
        """``<turnId>:<seq>``, from the signed body: deduplicate on it (keep keys longer than the window)."""
        return f"{self.turn_id}:{self.event.seq}"


def _bytes(value: bytes | bytearray | memoryview | str) -> bytes:
    return value.encode() if isinstance(value, str) else bytes(value)


def verify_webhook(
    secret: bytes | str,
    timestamp: str | None,
    signature: str | None,
    raw_body: bytes | bytearray | memoryview | str,
    tolerance: float = DEFAULT_TOLERANCE,
    *,
    now: float | None = None,
) -> WebhookDelivery:
    """The delivery when ``secret`` signed ``raw_body`` less than ``tolerance`` seconds from ``now``.

    Raises :class:`~agentauth.errors.WebhookMalformed` (a header missing or not
    in its form, a body that is not a delivery), :class:`~agentauth.errors.WebhookTooOld`
    (outside the window) or :class:`~agentauth.errors.WebhookBadSignature`.
    ``raw_body`` must be the bytes as received: a re-serialised JSON does not verify.
    """
    key = _bytes(secret)
    if not key:
        raise ValueError("verify_webhook: the secret is empty")
    raw = _bytes(raw_body)
    ts = (timestamp or "").strip()
    if not (ts.isascii() and ts.isdigit()):
        raise WebhookMalformed(f"{WEBHOOK_TIMESTAMP_HEADER} must be Unix seconds", check="malformed_timestamp")
    sig = (signature or "").strip()
    if not sig.startswith("v1=") or len(sig) != 3 + 64:
        raise WebhookMalformed(f"{WEBHOOK_SIGNATURE_HEADER} must be v1= and 64 hex digits", check="malformed_signature")
    clock = time.time() if now is None else now
    if abs(clock - int(ts)) > tolerance:
        raise WebhookTooOld(f"timestamp {ts} is more than {tolerance:g} s from now: refused as a replay")
    mac = hmac.new(key, ts.encode() + b"." + raw, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(("v1=" + mac).encode(), sig.encode()):
        raise WebhookBadSignature("signature does not match the body and timestamp")
    return _parse(raw)


def verify_webhook_headers(
    secret: bytes | str,
    headers: Mapping[str, str],
    raw_body: bytes | bytearray | memoryview | str,
    tolerance: float = DEFAULT_TOLERANCE,
    *,
    now: float | None = None,
) -> WebhookDelivery:
    """:func:`verify_webhook` with the timestamp and signature read from ``headers`` (any case)."""
    lower = {k.lower(): v for k, v in headers.items()}
    return verify_webhook(
        secret,
        lower.get(WEBHOOK_TIMESTAMP_HEADER.lower()),
        lower.get(WEBHOOK_SIGNATURE_HEADER.lower()),
        raw_body,
        tolerance,
        now=now,
    )


def _parse(raw: bytes) -> WebhookDelivery:
    try:
        body = json.loads(raw)
        if not isinstance(body, dict):
            raise TypeError("not an object")
        event = body.get("event")
        if not isinstance(event, dict):
            raise TypeError("no event")
        turn_id = body.get("turnId")
        if not isinstance(turn_id, str) or not turn_id:
            raise TypeError("no turnId")
        parsed = TurnEvent.from_json({**event, "turnId": turn_id})
    except (ValueError, TypeError) as exc:
        raise WebhookMalformed(f"signed body is not an agentauth delivery ({exc})") from exc
    origin = body.get("origin")
    return WebhookDelivery(
        connector=str(body.get("connector") or ""),
        swarm=str(body.get("swarm") or ""),
        instance_key=str(body.get("instanceKey") or ""),
        agent=str(body.get("agent") or ""),
        turn_id=turn_id,
        trace_id=str(body.get("traceId") or ""),
        event=parsed,
        origin=dict(origin) if isinstance(origin, dict) else {},
        raw=body,
    )
