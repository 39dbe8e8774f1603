"""What every adapter does with a tool call: invoke it through agentauth and
give the model the result as JSON text; a consent is either handed to the
caller's callback (then the call waits for it and runs again) or told to
the model, with the link, so that it asks the user."""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Mapping
from typing import Any

from ..client import AsyncClient, Client
from ..errors import AuthorizationRequired

# Called with the consent a tool needs; it shows authorization_url to the
# user (it may be a coroutine function for an AsyncClient).
OnAuthorizationRequired = Callable[[AuthorizationRequired], Any]


def consent_result(needed: AuthorizationRequired) -> str:
    """The result a model reads when the user must consent first, as the TypeScript SDK's
    ``authorizationRequiredResult``: flat, the link beside the status, and one message that
    says what happened and what to do (``expiresAt`` only when known)."""
    result: dict[str, Any] = {"status": "authorization_required", "authorizationUrl": needed.authorization_url}
    if needed.expires_at is not None:
        result["expiresAt"] = needed.expires_at.isoformat()
    said = needed.message.rstrip()
    if not said.endswith((".", "!", "?")):
        said += "."  # the server's messages are sentences; the SDK's default is not
    result["message"] = f"{said} Ask the user to open the link and consent, then call the tool again."
    return json.dumps(result)


def parse_args(arguments: str | Mapping[str, Any] | None) -> dict[str, Any]:
    if arguments is None or arguments == "":
        return {}
    if isinstance(arguments, str):
        value = json.loads(arguments)
        if not isinstance(value, dict):
            raise ValueError("tool arguments must be a JSON object")
        return value
    return dict(arguments)


async def invoke_async(
    client: AsyncClient,
    name: str,
    args: Mapping[str, Any],
    on_authorization_required: OnAuthorizationRequired | None,
    timeout: float,
) -> str:
    try:
        result = await client.invoke_tool(name, args)
    except AuthorizationRequired as needed:
        if on_authorization_required is None:
            return consent_result(needed)
        shown = on_authorization_required(needed)
        if inspect.isawaitable(shown):
            await shown
        await client.wait_for_authorization(needed, timeout)
        result = await client.invoke_tool(name, args)
    return json.dumps(result.result_json())


def invoke_sync(
    client: Client,
    name: str,
    args: Mapping[str, Any],
    on_authorization_required: OnAuthorizationRequired | None,
    timeout: float,
) -> str:
    try:
        result = client.invoke_tool(name, args)
    except AuthorizationRequired as needed:
        if on_authorization_required is None:
            return consent_result(needed)
        shown = on_authorization_required(needed)
        if inspect.isawaitable(shown):
            if inspect.iscoroutine(shown):
                shown.close()
            raise TypeError("on_authorization_required of a sync Client's tools must not be async") from needed
        client.wait_for_authorization(needed, timeout)
        result = client.invoke_tool(name, args)
    return json.dumps(result.result_json())
