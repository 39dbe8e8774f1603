"""The integration suite's side of sdk/TESTING.md: the environment a Go test
(TestSDKs, TestDeployedSDKs) sets, and its harness's control server.

Without ``AGENTAUTH_TEST_HARNESS`` every test here is skipped, unless
``AGENTAUTH_SDK_REQUIRE=1``, which makes a missing harness a failure.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

import agentauth


@dataclass(frozen=True)
class Contract:
    harness: str
    app: str
    subject_prefix: str
    login: str
    swarm: str
    agent: str
    claims: dict[str, Any]
    proxy_url: str
    tool: str | None
    connector: str | None
    webhook_secret: str | None = field(repr=False)
    agent_token: str | None = field(repr=False)

    def subject(self, login: str) -> str:
        return self.subject_prefix + login


def _contract() -> Contract | None:
    env = os.environ
    harness = env.get("AGENTAUTH_TEST_HARNESS")
    if not harness:
        return None
    missing = [
        k
        for k in (
            "AGENTAUTH_URL",
            "AGENTAUTH_TEST_APP",
            "AGENTAUTH_TEST_SUBJECT_PREFIX",
            "AGENTAUTH_TEST_LOGIN",
            "AGENTAUTH_TEST_SWARM",
            "AGENTAUTH_TEST_AGENT",
            "AGENTAUTH_TEST_PROXY_URL",
        )
        if not env.get(k)
    ]
    if missing:
        pytest.fail(f"AGENTAUTH_TEST_HARNESS is set but not {', '.join(missing)} (sdk/TESTING.md)")
    return Contract(
        harness=harness.rstrip("/"),
        app=env["AGENTAUTH_TEST_APP"],
        subject_prefix=env["AGENTAUTH_TEST_SUBJECT_PREFIX"],
        login=env["AGENTAUTH_TEST_LOGIN"],
        swarm=env["AGENTAUTH_TEST_SWARM"],
        agent=env["AGENTAUTH_TEST_AGENT"],
        claims=json.loads(env.get("AGENTAUTH_TEST_CLAIMS") or "{}"),
        proxy_url=env["AGENTAUTH_TEST_PROXY_URL"],
        tool=env.get("AGENTAUTH_TEST_TOOL") or None,
        connector=env.get("AGENTAUTH_TEST_CONNECTOR") or None,
        webhook_secret=env.get("AGENTAUTH_TEST_WEBHOOK_SECRET") or None,
        agent_token=env.get("AGENTAUTH_AGENT_TOKEN") or None,
    )


@pytest.fixture(scope="session")
def contract() -> Contract:
    c = _contract()
    if c is None:
        if os.environ.get("AGENTAUTH_SDK_REQUIRE") == "1":
            pytest.fail("AGENTAUTH_TEST_HARNESS is not set and AGENTAUTH_SDK_REQUIRE=1: no harness to test against")
        pytest.skip("no harness: set AGENTAUTH_TEST_HARNESS (a Go test does: sdk/TESTING.md)")
    return c


def unique(prefix: str) -> str:
    """A name no other suite or run uses (the suites share one agentauth)."""
    return f"{prefix}-{secrets.token_hex(4)}"


class Harness:
    """The Go test's control server: consent in Chromium, drop the proxy's connections, deliveries."""

    def __init__(self, base: str) -> None:
        self._http = httpx.Client(base_url=base, timeout=httpx.Timeout(120.0, connect=5.0))

    def consent(self, authorization_url: str, login: str) -> dict[str, Any]:
        r = self._http.post("/consent", json={"authorizationUrl": authorization_url, "login": login})
        assert r.status_code == 200, f"POST /consent: HTTP {r.status_code} {r.text[:300]}"
        page: dict[str, Any] = r.json()
        assert page.get("title") == "Connected", f"the callback page says {page.get('title')!r}: {page.get('text')!r}"
        return page

    def drop(self) -> int:
        r = self._http.post("/drop")
        assert r.status_code == 200, f"POST /drop: HTTP {r.status_code} {r.text[:300]}"
        return int(r.json()["dropped"])

    def deliveries(self, connector: str) -> list[dict[str, Any]]:
        r = self._http.get("/deliveries", params={"connector": connector})
        assert r.status_code == 200, f"GET /deliveries: HTTP {r.status_code} {r.text[:300]}"
        data: list[dict[str, Any]] = r.json()["data"]
        return data

    def close(self) -> None:
        self._http.close()


@pytest.fixture(scope="session")
def harness(contract: Contract) -> Iterator[Harness]:
    h = Harness(contract.harness)
    yield h
    h.close()


@pytest.fixture
async def client(contract: Contract) -> AsyncIterator[agentauth.AsyncClient]:
    """A client from the environment alone, as an application would make it."""
    async with agentauth.AsyncClient() as c:
        yield c


@pytest.fixture
def sync_client(contract: Contract) -> Iterator[agentauth.Client]:
    with agentauth.Client() as c:
        yield c
