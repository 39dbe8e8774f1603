"""The top-level package exports what the TypeScript SDK's index does: every error class, the
models, TURN_END_TYPES and the webhook header names."""

from __future__ import annotations

import inspect

import agentauth
from agentauth import errors, models, webhooks


def test_every_public_error_class_is_exported() -> None:
    public = {
        name
        for name, value in vars(errors).items()
        if inspect.isclass(value)
        and issubclass(value, BaseException)
        and value.__module__ == errors.__name__
        and not name.startswith("_")
    }
    assert "AgentauthError" in public and "WebhookTooOld" in public
    assert public <= set(agentauth.__all__), sorted(public - set(agentauth.__all__))
    assert public <= set(errors.__all__), sorted(public - set(errors.__all__))
    for name in public:
        assert getattr(agentauth, name) is getattr(errors, name)


def test_constants_and_models_are_exported() -> None:
    assert agentauth.TURN_END_TYPES is models.TURN_END_TYPES
    assert {"turn.completed", "turn.failed", "turn.interrupted"} == agentauth.TURN_END_TYPES
    assert agentauth.WEBHOOK_TIMESTAMP_HEADER == webhooks.WEBHOOK_TIMESTAMP_HEADER == "X-Agentauth-Timestamp"
    assert agentauth.WEBHOOK_SIGNATURE_HEADER == webhooks.WEBHOOK_SIGNATURE_HEADER == "X-Agentauth-Signature"
    assert set(models.__all__) <= set(agentauth.__all__), sorted(set(models.__all__) - set(agentauth.__all__))
    # The webhook module's names are the package's (its DEFAULT_TOLERANCE is verify_webhook's default, not exported).
    assert set(webhooks.__all__) - {"DEFAULT_TOLERANCE"} <= set(agentauth.__all__)
    assert {"WEBHOOK_TIMESTAMP_HEADER", "WEBHOOK_SIGNATURE_HEADER", "verify_webhook"} <= set(webhooks.__all__)


def test_all_names_resolve() -> None:
    assert len(agentauth.__all__) == len(set(agentauth.__all__))
    for name in agentauth.__all__:
        assert hasattr(agentauth, name), name
