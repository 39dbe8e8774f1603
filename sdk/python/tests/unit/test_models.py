"""Values: secrets never print, Go's times parse."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from datetime import timezone

import pytest

from agentauth import AccessToken, Secret
from agentauth.models import parse_time


def test_secret_redacts_itself() -> None:
    s = Secret("hunter2")
    assert (
        "hunter2" not in repr(s) and "hunter2" not in str(s) and "hunter2" not in f"{s}" and "hunter2" not in f"{s!r}"
    )
    assert s.reveal() == "hunter2"
    assert s == Secret("hunter2") and s != Secret("other")
    with pytest.raises(TypeError):
        pickle.dumps(s)


def test_token_repr_holds_no_token() -> None:
    t = AccessToken.from_json({"status": "ready", "accessToken": "abc123secret", "scopes": ["a"], "refreshable": False})
    assert "abc123secret" not in repr(t)
    assert t.authorization_header() == "Bearer abc123secret"
    assert t.expires_in() is None


@pytest.mark.parametrize(
    ("text", "micro"),
    [("2026-11-24T10:00:02Z", 0), ("2026-11-24T10:00:02.123456789Z", 123456), ("2026-11-24T10:00:02.5+01:00", 500000)],
)
def test_parse_time(text: str, micro: int) -> None:
    t = parse_time(text)
    assert t is not None and t.microsecond == micro and t.tzinfo is not None
    assert t.astimezone(timezone.utc).minute == 0


def test_parse_time_garbage() -> None:
    assert parse_time("yesterday") is None and parse_time(None) is None


def test_a_token_copies_and_converts_with_its_secret_still_redacted() -> None:
    t = AccessToken.from_json({"status": "ready", "accessToken": "abc123secret"})
    assert copy.copy(t.access_token) is t.access_token
    assert copy.deepcopy(t) == t
    as_dict = dataclasses.asdict(t)  # deep-copies each field
    assert as_dict["access_token"].reveal() == "abc123secret"
    assert "abc123secret" not in repr(as_dict)
