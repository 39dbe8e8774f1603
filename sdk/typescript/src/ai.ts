// @agentauth/client/ai: agentauth's tool catalog as Vercel AI SDK tools
// (`tool()` + `jsonSchema()` from `ai`, an optional peer dependency that
// only this module imports). Each tool's execute calls POST
// /v1/tools/invoke, so the tool hooks (scopes, rate limit, audit) and the
// broker's OAuth tokens apply as for any agent.

import { jsonSchema, type Tool, tool } from "ai";
import type { AgentauthClient } from "./client.js";
import { AuthorizationRequired } from "./errors.js";
import type { ToolManifestEntry } from "./types.js";

export interface AiToolsOptions {
  /** Which manifest entries to offer (default all). */
  filter?: (entry: ToolManifestEntry) => boolean;
  /**
   * What the model gets when a tool needs the user's consent; default: an
   * `authorization_required` result carrying the URL, which the model can
   * show the user before calling the tool again. Throw from it to end the
   * generation instead.
   */
  onAuthorizationRequired?: (required: AuthorizationRequired, toolName: string) => unknown;
}

/** What the model reads for a tool that needs consent (the default of onAuthorizationRequired). */
export interface AuthorizationRequiredResult {
  status: "authorization_required";
  authorizationUrl: string;
  /** ISO 8601; absent when the server gave no expiry. */
  expiresAt: string | undefined;
  message: string;
}

/** An agentauth tool as an AI SDK tool: the manifest's JSON Schema as input, the tool's result as output. */
export type AgentauthAiTool = Tool<Record<string, unknown>, unknown>;

/** The default answer to the model for a tool that needs consent. */
export function authorizationRequiredResult(required: AuthorizationRequired): AuthorizationRequiredResult {
  return {
    status: "authorization_required",
    authorizationUrl: required.authorizationUrl,
    expiresAt: required.expiresAt?.toISOString(),
    message: `${sentence(required.message)} Ask the user to open the link and consent, then call the tool again.`,
  };
}

// The server's messages are sentences; the SDK's default one is not.
function sentence(text: string): string {
  const t = text.trimEnd();
  return /[.!?]$/.test(t) ? t : `${t}.`;
}

/**
 * AI SDK tools for the manifest entries: named by the entry's name, its
 * description and input_schema as the model sees them, executed through
 * client.invokeTool. The result (`{status: "ok", output}` or `{status:
 * "error", error}`) is what the model reads, as in a turn.
 */
export function toAiTools(
  client: AgentauthClient,
  manifest: readonly ToolManifestEntry[],
  opts: AiToolsOptions = {},
): Record<string, AgentauthAiTool> {
  const tools: Record<string, AgentauthAiTool> = {};
  for (const entry of manifest) {
    if (opts.filter && !opts.filter(entry)) continue;
    if (Object.hasOwn(tools, entry.name)) continue;
    const schema = (entry.input_schema ?? { type: "object", properties: {} }) as Parameters<
      typeof jsonSchema
    >[0];
    tools[entry.name] = tool({
      description: entry.description,
      inputSchema: jsonSchema<Record<string, unknown>>(schema),
      execute: async (input: Record<string, unknown>, options) => {
        try {
          const inv = await client.invokeTool(entry.name, input ?? {}, {
            ...(options?.toolCallId ? { callId: options.toolCallId } : {}),
            ...(options?.abortSignal ? { signal: options.abortSignal } : {}),
          });
          return inv.result;
        } catch (err) {
          if (err instanceof AuthorizationRequired) {
            return (opts.onAuthorizationRequired ?? authorizationRequiredResult)(err, entry.name);
          }
          throw err;
        }
      },
    });
  }
  return tools;
}

/** The caller's tool catalog (GET /v1/agents/tools) as AI SDK tools. */
export async function aiTools(
  client: AgentauthClient,
  opts: AiToolsOptions & { signal?: AbortSignal } = {},
): Promise<Record<string, AgentauthAiTool>> {
  const manifest = await client.listTools(opts.signal ? { signal: opts.signal } : {});
  return toAiTools(client, manifest, opts);
}
