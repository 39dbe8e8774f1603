"""Tokens through a real consent (sdk/TESTING.md, 1): get_access_token →
AuthorizationRequired → consent in Chromium → wait_for_authorization →
a ready token; and the decorator, whose callback consents."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

import agentauth

from .conftest import Contract, Harness, unique


async def test_token_after_consent(client: agentauth.AsyncClient, contract: Contract, harness: Harness) -> None:
    login = unique("py-token")
    subjects = {"user": contract.subject(login)}

    with pytest.raises(agentauth.AuthorizationRequired) as info:
        await client.get_access_token(contract.app, subjects=subjects)
    needed = info.value
    assert needed.authorization_url.startswith("http")
    assert needed.session_id
    assert needed.expires_at is not None and needed.expires_at > datetime.now(timezone.utc)
    assert needed.request_id

    # Asked again before consent: the same pending session (no pile of sessions).
    with pytest.raises(agentauth.AuthorizationRequired) as again:
        await client.get_access_token(contract.app, subjects=subjects)
    assert again.value.session_id == needed.session_id

    harness.consent(needed.authorization_url, login)
    status = await client.wait_for_authorization(needed, timeout=60)
    assert status.status == "completed"

    token = await client.get_access_token(contract.app, subjects=subjects, min_ttl=60)
    assert token.access_token.reveal()
    assert token.access_token.reveal() not in repr(token)
    assert token.expires_at is None or token.expires_at > datetime.now(timezone.utc)

    revoked = await client.revoke(contract.app, contract.subject(login))
    assert revoked.grant_id
    with pytest.raises(agentauth.AuthorizationRequired):
        await client.get_access_token(contract.app, subjects=subjects)


async def test_unknown_app_and_session_are_typed(client: agentauth.AsyncClient) -> None:
    with pytest.raises(agentauth.errors.OAuthAppNotFound):
        await client.get_access_token("no-such-app-" + unique("x"), subjects={"user": "u"})
    with pytest.raises(agentauth.NotFound) as info:
        await client.authorization_status("as-" + "0" * 32)
    assert info.value.request_id


def test_decorator_consents_through_its_callback(
    sync_client: agentauth.Client, contract: Contract, harness: Harness
) -> None:
    login = unique("py-deco")
    shown: list[str] = []

    def show_link(url: str) -> None:
        shown.append(url)
        harness.consent(url, login)  # the user opens the link and approves

    @agentauth.requires_access_token(
        sync_client,
        contract.app,
        subjects={"user": contract.subject(login)},
        on_authorization_url=show_link,
        wait_timeout=60,
    )
    def call_upstream(greeting: str, *, token: agentauth.AccessToken) -> str:
        assert token.access_token.reveal()
        return f"{greeting} with a {token.token_type} token"

    assert call_upstream("hello") == "hello with a Bearer token"
    assert len(shown) == 1
    # Consent given: the next call needs no link.
    assert call_upstream("again") == "again with a Bearer token"
    assert len(shown) == 1


async def test_async_decorator(client: agentauth.AsyncClient, contract: Contract, harness: Harness) -> None:
    login = unique("py-adeco")

    async def show_link(url: str) -> None:
        harness.consent(url, login)

    @agentauth.requires_access_token(
        client,
        contract.app,
        subjects={"user": contract.subject(login)},
        on_authorization_url=show_link,
        wait_timeout=60,
    )
    async def fetch(*, token: agentauth.AccessToken) -> bool:
        return bool(token.access_token.reveal())

    assert await fetch()
