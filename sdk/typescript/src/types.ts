// The wire shapes of agentauth's routes, as the README and docs/ describe
// them. Fields the server may add later are allowed through (index
// signatures where a shape is open).

/** An OAuthApp (or Swarm) reference: `"OAuthApp/<name>"`, or `{kind, name}`. */
export type ObjectRef = string | { kind: string; name: string };

/** Who caused a turn (or a token request). */
export interface Actor {
  type: "user" | "service" | "system" | (string & {});
  id: string;
  display?: string;
}

/** The OAuth subjects tokens belong to: `user` and/or `global`, as the app's subjectMode asks. */
export interface Subjects {
  user?: string;
  global?: string;
}

/** Who a turn (or a token request) acts for. */
export interface TurnAuth {
  actor?: Actor;
  subjects?: Subjects;
  /** The end user's verified claims: a turn's tools are what a caller with them may see. */
  claims?: Record<string, unknown>;
}

/** The agent instance a consent wakes: its parked turn resumes when the user consents. */
export interface ResumeTarget {
  /** The Swarm's name (or `"Swarm/<name>"`). */
  swarm: string;
  instanceKey: string;
  agent: string;
}

/** `GET /v1/oauth/sessions/{id}`. */
export interface AuthSessionStatus {
  status: "pending" | "exchanging" | "completed" | "failed" | "expired" | (string & {});
  expiresAt: string;
  statusReason?: string;
}

/** `POST /v1/oauth/revoke`. */
export interface RevokeResult {
  revoked: true;
  grantId: string;
  providerRevocation: "revoked" | "not_configured" | "failed" | (string & {});
}

/** One pending consent of an agent instance (`GET /v1/oauth/pending`). */
export interface PendingAuthorization {
  authSessionId: string;
  oauthAppRef: { kind: string; name: string };
  provider: string;
  subjectMode: string;
  authorizationUrl: string;
  expiresAt: string;
  message: string;
  deviceCode?: { verificationUri: string; userCode: string };
}

/** A tool of the manifest (`GET /v1/agents/tools`). */
export interface ToolManifestEntry {
  tool_id: string;
  name: string;
  description: string;
  input_schema?: Record<string, unknown>;
  source_id?: string;
  source_path?: string;
  tags?: string[];
  version?: string;
  [field: string]: unknown;
}

/** A skill (`GET /v1/agents/skills`). */
export interface Skill {
  name: string;
  description: string;
  content: string;
  scope: string;
  tenant_id?: string;
  relevance_score: number;
  [field: string]: unknown;
}

/** A tool result: the same object a turn's tool call produces. */
export type ToolResult =
  | { status: "ok"; output: unknown }
  | {
      status: "error";
      error: { message: string; name?: string; code?: string; suggestion?: string; [field: string]: unknown };
    };

/** `POST /v1/tools/invoke`: the result and the content-free audit events. */
export interface ToolInvocation {
  result: ToolResult;
  toolCalled: Record<string, unknown>;
  toolReturned: Record<string, unknown>;
}

/** An event to post to an agent instance. */
export interface PostEventInput {
  /** The user's message (required for `user.input`). */
  text?: string;
  /**
   * Who the turn acts for (required, as the Python SDK's `auth=`): the
   * actor, the OAuth subjects whose grants its tools use, and the user's
   * verified claims, which decide the tools it sees. `{}` for no one (then
   * the turn sees no tool).
   */
  auth: TurnAuth;
  /** `user.input` (default), `system.wakeup`, `tool.completion` or a connector's own type. */
  type?: string;
  /** One of the swarm's agents; else the swarm's ingress rules pick. */
  agent?: string;
  properties?: Record<string, string>;
  /** Kept with the turn for the answer's delivery; `origin.connector` names the Connector. */
  origin?: Record<string, unknown>;
  /**
   * Makes a retried post queue the event once (1–120 printable ASCII
   * characters, no space). The SDK makes one up when absent, so its own
   * retries never queue an event twice.
   */
  id?: string;
}

/** `POST /v1/instances/{swarm}/{instanceKey}/events` → 202. */
export interface PostedEvent {
  eventId: string;
  swarm: string;
  instanceKey: string;
  agent: string;
}

/** A turn as an instance shows it. */
export interface TurnSummary {
  id: string;
  status: "running" | "parked" | "completed" | "failed" | "interrupted" | (string & {});
  /** The id of the event the turn handles: the posted event's `eventId` (waitForTurn's opts.eventId). */
  inputEventId: string;
  inputType: string;
  traceId: string;
  bundleRevision?: string;
  steps: number;
  toolCalls: number;
  errors: number;
  usage: Record<string, number>;
  error?: { code: string; message: string };
  startedAt: string;
  endedAt?: string;
  finalAnswer?: string;
  [field: string]: unknown;
}

/** An agent instance (the lifecycle routes answer this record). */
export interface InstanceRecord {
  swarm: string;
  instanceKey: string;
  agent: string;
  status: "active" | "paused" | "terminated" | (string & {});
  createdAt: string;
  updatedAt: string;
  [field: string]: unknown;
}

/** `GET /v1/instances/{swarm}/{instanceKey}/{agent}`. */
export interface Instance extends InstanceRecord {
  activeTurn?: TurnSummary;
  backlog: number;
  recentTurns: TurnSummary[];
}

/** `GET /v1/instances`. */
export interface InstanceList {
  data: Array<InstanceRecord & { activeTurn?: string }>;
  unreadable: Array<{ swarm?: string; instanceKey?: string; agent?: string; id: string; reason: string }>;
}

/** One event of a turn. */
export interface TurnEvent {
  turnId: string;
  seq: number;
  type:
    | "turn.started"
    | "step.started"
    | "step.completed"
    | "tool.called"
    | "tool.completed"
    | "tool.failed"
    | "turn.parked"
    | "turn.resumed"
    | "turn.stepLimitReached"
    | "message.warning"
    | "turn.completed"
    | "turn.failed"
    | "turn.interrupted"
    | (string & {});
  at: string;
  data?: Record<string, unknown>;
}

/** The event types that end a turn (and its stream). */
export const TURN_END_TYPES: ReadonlySet<string> = new Set([
  "turn.completed",
  "turn.failed",
  "turn.interrupted",
]);
