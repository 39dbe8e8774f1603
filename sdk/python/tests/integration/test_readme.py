"""Every snippet of sdk/python/README.md marked ``<!-- sdk test runs this: NAME -->``
runs against the harness's agentauth (sdk/TESTING.md, 5), so the README
cannot drift from the SDK.

A snippet runs as written, top-level ``await`` allowed, with the names the
README says are yours (``app``, ``user``, ``show_link_to_user``, …) bound
to the harness's values; ``show_link_to_user`` consents through the harness
as the login whose subject ``user`` is.
"""

from __future__ import annotations

import ast
import asyncio
import importlib.util
import inspect
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import agentauth

from .conftest import Contract, Harness, unique

README = Path(__file__).resolve().parents[2] / "README.md"
MARKER = re.compile(r"<!-- sdk test runs this: ([\w-]+) -->\n```python\n(.*?)```", re.S)
# The block of the names the snippets use, with make run's values: the
# tests bind the same names to the harness's.
NAMES = re.compile(r"<!-- sdk test binds these: names -->\n```python\n(.*?)```", re.S)

SNIPPETS: dict[str, str] = dict(MARKER.findall(README.read_text()))
# What the turns snippet leaves for the webhook snippet's test (run after it).
TURNS: dict[str, str] = {}
EXPECTED = {"connect", "token", "decorator", "tools", "adapters", "turns", "lifecycle", "webhook"}


def test_the_readme_marks_its_snippets() -> None:
    assert set(SNIPPETS) == EXPECTED, f"runnable snippets in README.md: {sorted(SNIPPETS)}"


def test_the_readme_names_are_the_ones_the_snippets_run_with(contract: Contract, harness: Harness) -> None:
    """The README's names block runs as written, and binds exactly the names
    the snippets are run with here (with make run's values there)."""
    blocks = NAMES.findall(README.read_text())
    assert len(blocks) == 1, "README.md has no (or more than one) names block"
    ns: dict[str, Any] = {}
    exec(compile(blocks[0], "README.md[names]", "exec"), ns)  # noqa: S102 - the README's own block
    defined = {k for k in ns if not k.startswith("__")}
    bound = {k for k in names(contract, harness, "x", []) if not k.startswith("__")}
    assert defined == bound, f"README names {sorted(defined)}, the tests bind {sorted(bound)}"
    ns["show_link_to_user"]("https://provider.example/consent")  # it only prints


async def run(name: str, ns: dict[str, Any]) -> dict[str, Any]:
    code = compile(SNIPPETS[name], f"README.md[{name}]", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    result = eval(code, ns)  # noqa: S307 - the README's own snippet, the point of this test
    if inspect.iscoroutine(result):
        await result
    return ns


def consenting(harness: Harness, login: str, shown: list[str]) -> Callable[[str], None]:
    def show_link_to_user(url: str) -> None:
        shown.append(url)
        harness.consent(url, login)

    return show_link_to_user


def names(contract: Contract, harness: Harness, login: str, shown: list[str]) -> dict[str, Any]:
    return {
        "__name__": "readme_snippet",
        "app": contract.app,
        "user": contract.subject(login),
        "swarm": contract.swarm,
        "agent": contract.agent,
        "claims": contract.claims,
        "instance_key": unique("py-readme"),
        "origin": {"connector": contract.connector, "channel": "C123"} if contract.connector else {"channel": "C123"},
        "webhook_secret": contract.webhook_secret or "",
        "show_link_to_user": consenting(harness, login, shown),
    }


def needs_tools(contract: Contract) -> None:
    if not contract.agent_token or not contract.tool:
        pytest.skip("no tool routes here (the AWS run)")


async def test_connect(contract: Contract, harness: Harness, capsys: pytest.CaptureFixture[str]) -> None:
    await run("connect", names(contract, harness, unique("py-r"), []))


async def test_token(contract: Contract, harness: Harness, capsys: pytest.CaptureFixture[str]) -> None:
    shown: list[str] = []
    ns = await run("token", names(contract, harness, unique("py-rtok"), shown))
    out = capsys.readouterr().out
    assert len(shown) == 1, "a new user must be asked to consent once"
    token: agentauth.AccessToken = ns["token"]
    assert token.access_token.reveal() and token.access_token.reveal() not in out
    assert "[redacted]" in out
    assert ns["headers"]["Authorization"].startswith("Bearer ")


async def test_decorator(contract: Contract, harness: Harness, capsys: pytest.CaptureFixture[str]) -> None:
    shown: list[str] = []
    await run("decorator", names(contract, harness, unique("py-rdeco"), shown))
    assert len(shown) == 1
    assert "called the API with a Bearer token" in capsys.readouterr().out


async def test_tools(contract: Contract, harness: Harness, capsys: pytest.CaptureFixture[str]) -> None:
    needs_tools(contract)
    ns = await run("tools", names(contract, harness, contract.login, []))
    result: agentauth.ToolInvocation = ns["result"]
    assert result.ok and result.output["sub"] == contract.login
    assert "whoami" in capsys.readouterr().out


async def test_adapters(contract: Contract, harness: Harness, capsys: pytest.CaptureFixture[str]) -> None:
    needs_tools(contract)
    for module in ("agents", "langchain_core"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed (an extra)")
    await run("adapters", names(contract, harness, contract.login, []))
    out = capsys.readouterr().out
    assert out.count(repr(contract.tool)) == 2, out


async def test_turns(contract: Contract, harness: Harness, capsys: pytest.CaptureFixture[str]) -> None:
    shown: list[str] = []
    ns = await run("turns", names(contract, harness, unique("py-rturn"), shown))
    TURNS["turn_id"] = ns["turn"].id
    out = capsys.readouterr().out
    assert len(shown) == 1, "the turn parks once on the new user's consent"
    assert ns["event"].type == "turn.completed"
    assert "You are " in out and "turn.parked" in out and "turn.resumed" in out


async def test_lifecycle(
    contract: Contract, harness: Harness, client: agentauth.AsyncClient, capsys: pytest.CaptureFixture[str]
) -> None:
    ns = names(contract, harness, unique("py-rlife"), [])
    posted = await client.post_event(contract.swarm, ns["instance_key"], "hello", auth=agentauth.TurnAuth())
    ns["agent"] = posted.agent
    await client.wait_for_turn(contract.swarm, ns["instance_key"], posted.agent, event_id=posted.event_id)
    await run("lifecycle", ns)
    out = capsys.readouterr().out
    assert "paused" in out and "instanceTerminated" in out
    with pytest.raises(agentauth.NotFound):
        await client.get_instance(contract.swarm, ns["instance_key"], posted.agent)


async def test_webhook(contract: Contract, harness: Harness, capsys: pytest.CaptureFixture[str]) -> None:
    if not contract.connector or not contract.webhook_secret:
        pytest.skip("no connector here (the AWS run)")
    turn_id = TURNS.get("turn_id")
    if turn_id is None:
        pytest.fail("the turns snippet did not complete: no turn whose deliveries to check")
    shown: list[str] = []
    ns = names(contract, harness, unique("py-rhook"), [])
    ns["show_link_to_user"] = shown.append  # the link reaches the test, not a browser: that consent was given
    ns = await run("webhook", ns)
    handle: Callable[[dict[str, str], bytes], int] = ns["handle_delivery"]

    # The turns snippet's turn, delivered to the Connector: its parked and completed events
    # (a delivery is sent after its event is stored: wait for them).
    ours: list[dict[str, Any]] = []
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        ours = [d for d in harness.deliveries(contract.connector) if f'"turnId":"{turn_id}"' in d["body"]]
        if len(ours) >= 2:
            break
        await asyncio.sleep(0.2)
    assert len(ours) >= 2, f"deliveries of turn {turn_id}: {len(ours)}"
    for d in ours:
        assert handle(d["headers"], d["body"].encode()) == 200
        assert handle(d["headers"], d["body"].encode()) == 200  # again: already handled
    keys = {
        agentauth.verify_webhook_headers(contract.webhook_secret, d["headers"], d["body"]).delivery_key for d in ours
    }
    assert ns["handled"] == keys
    d = ours[-1]
    assert handle(d["headers"], d["body"].encode().replace(b'"seq":', b'"seq": ')) == 401
    out = capsys.readouterr().out
    assert "refused: signature_mismatch" in out and "You are " in out
    assert len(shown) == 1  # the parked event's link, once
