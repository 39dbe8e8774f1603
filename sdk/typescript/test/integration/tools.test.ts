// sdk/TESTING.md 2: the tool routes with the agent JWT (local only): list,
// invoke → AuthorizationRequired → consent → invoke → ok, skills; and the
// AI SDK adapter against the real routes.

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { aiTools } from "../../src/ai.js";
import {
  AgentauthClient,
  AuthorizationRequired,
  GrantNotFoundError,
  UnauthenticatedError,
} from "../../src/index.js";
import {
  app,
  assertHarness,
  consent,
  newClient,
  skipUnlessHarness,
  subjectPrefix,
  toolLogin,
  toolName,
} from "./harness.js";

const needs = ["AGENTAUTH_AGENT_TOKEN", "AGENTAUTH_TEST_TOOL", "AGENTAUTH_TEST_LOGIN", "AGENTAUTH_TEST_APP"];
// The tool tests are local only: on AWS their environment is unset.
const skip = process.env.AGENTAUTH_AGENT_TOKEN
  ? skipUnlessHarness(...needs)
  : "no AGENTAUTH_AGENT_TOKEN (tool tests are local only)";

describe("tools", { skip }, () => {
  it("the harness is there", () => assertHarness(...needs));

  it("list, invoke → AuthorizationRequired → consent → invoke → ok, skills, the AI SDK adapter", async () => {
    const c = newClient();
    // The login's grant from an earlier run (or the other SDK's suite) goes first.
    try {
      await c.revoke(app, subjectPrefix + toolLogin);
    } catch (err) {
      if (!(err instanceof GrantNotFoundError)) throw err;
    }

    const tools = await c.listTools();
    const entry = tools.find((t) => t.name === toolName);
    assert.ok(entry, `the manifest lists ${toolName}: ${tools.map((t) => t.name).join(", ")}`);

    let required: AuthorizationRequired | undefined;
    try {
      await c.invokeTool(toolName, {});
    } catch (err) {
      if (!(err instanceof AuthorizationRequired)) throw err;
      required = err;
    }
    assert.ok(required, "the first invoke needs the login's consent");
    assert.match(required.authorizationUrl, /^https?:\/\//);
    await consent(required.authorizationUrl, toolLogin);

    const inv = await c.invokeTool(toolName, {});
    assert.equal(inv.result.status, "ok", JSON.stringify(inv.result));
    assert.equal((inv.result as { output: { sub?: string } }).output.sub, toolLogin);
    assert.ok(inv.toolCalled, "the invocation carries its audit events");

    const skills = await c.searchSkills("who am I", { topK: 5 });
    assert.ok(Array.isArray(skills));

    // The same tool through the AI SDK adapter: the model's call reaches
    // the real route and the broker's token.
    const ai = await aiTools(c);
    const t = ai[toolName];
    assert.ok(t?.execute, `the adapter offers ${toolName}`);
    const out = (await t.execute({}, { toolCallId: "call-sdk-1", messages: [] })) as {
      status: string;
      output: { sub?: string };
    };
    assert.equal(out.status, "ok");
    assert.equal(out.output.sub, toolLogin);
  });

  it("a bad agent JWT is UnauthenticatedError with its reason", async () => {
    const c = new AgentauthClient({ agentToken: "not-a-jwt" });
    await assert.rejects(c.listTools(), (e: unknown) => {
      assert.ok(e instanceof UnauthenticatedError);
      assert.equal(e.reason, "malformed");
      assert.ok(e.requestId);
      return true;
    });
  });
});
