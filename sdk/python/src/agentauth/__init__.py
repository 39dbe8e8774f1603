"""agentauth's client SDK: tokens, consent, tools and turns without hand-built JSON.

``AsyncClient`` (the one for agent runtimes) and ``Client`` speak agentauth's
HTTP API (README, *HTTP API*): to ``agentauth serve`` with its runtime token,
to the AWS deployment with SigV4. ``verify_webhook`` checks an origin
delivery. Every error is an ``AgentauthError`` with agentauth's code and the
request id (``agentauth.errors``). Nothing here logs or prints a token.
"""

from ._core import RetryPolicy, Timeouts
from ._version import __version__
from .client import AsyncClient, Client
from .decorators import requires_access_token
from .errors import (
    AgentauthError,
    AuthorizationExpired,
    AuthorizationFailed,
    AuthorizationRequired,
    AuthorizationTimeout,
    InstanceTerminated,
    MissingCredential,
    NotFound,
    Timeout,
    WebhookBadSignature,
    WebhookMalformed,
    WebhookTooOld,
    WebhookVerificationError,
)
from .models import (
    AccessToken,
    Actor,
    AuthSessionStatus,
    Instance,
    InstanceDeleted,
    InstanceRecord,
    PendingAuthorization,
    PostedEvent,
    ResumeTarget,
    RevokeResult,
    Secret,
    Skill,
    ToolError,
    ToolInvocation,
    ToolManifestEntry,
    TurnAuth,
    TurnEvent,
    TurnSummary,
)
from .webhooks import WebhookDelivery, verify_webhook, verify_webhook_headers

__all__ = [
    "AccessToken",
    "Actor",
    "AgentauthError",
    "AsyncClient",
    "AuthSessionStatus",
    "AuthorizationExpired",
    "AuthorizationFailed",
    "AuthorizationRequired",
    "AuthorizationTimeout",
    "Client",
    "Instance",
    "InstanceDeleted",
    "InstanceRecord",
    "InstanceTerminated",
    "MissingCredential",
    "NotFound",
    "PendingAuthorization",
    "PostedEvent",
    "ResumeTarget",
    "RetryPolicy",
    "RevokeResult",
    "Secret",
    "Skill",
    "Timeout",
    "Timeouts",
    "ToolError",
    "ToolInvocation",
    "ToolManifestEntry",
    "TurnAuth",
    "TurnEvent",
    "TurnSummary",
    "WebhookBadSignature",
    "WebhookDelivery",
    "WebhookMalformed",
    "WebhookTooOld",
    "WebhookVerificationError",
    "__version__",
    "requires_access_token",
    "verify_webhook",
    "verify_webhook_headers",
]
