import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { generateText, stepCountIs } from "ai";
import { MockLanguageModelV3 } from "ai/test";
import { aiTools, toAiTools } from "../../src/ai.js";
import { AuthorizationRequired } from "../../src/index.js";
import { client, json, scriptedFetch } from "./fakes.js";

const manifest = {
  data: [
    {
      tool_id: "demo:whoami",
      name: "whoami",
      description: "Who the user is",
      input_schema: { type: "object", properties: { verbose: { type: "boolean" } } },
    },
  ],
};

const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 1, text: 1, reasoning: 0 },
};

describe("AI SDK adapter", () => {
  it("the catalog as AI SDK tools, run by generateText through POST /v1/tools/invoke", async () => {
    const { fetch, sent } = scriptedFetch([
      json(200, manifest),
      json(200, { result: { status: "ok", output: { sub: "alice" } }, toolCalled: {}, toolReturned: {} }),
    ]);
    const c = client(fetch);
    const tools = await aiTools(c);
    const prompts: unknown[] = [];
    let step = 0;
    const model = new MockLanguageModelV3({
      doGenerate: async (opts) => {
        prompts.push(opts.prompt);
        if (step++ === 0) {
          assert.equal(opts.tools?.[0]?.name, "whoami");
          return {
            content: [
              { type: "tool-call", toolCallId: "call-1", toolName: "whoami", input: '{"verbose":true}' },
            ],
            finishReason: { unified: "tool-calls", raw: undefined },
            usage,
            warnings: [],
          };
        }
        return {
          content: [{ type: "text", text: "You are alice." }],
          finishReason: { unified: "stop", raw: undefined },
          usage,
          warnings: [],
        };
      },
    });
    const res = await generateText({ model, tools, prompt: "who am I?", stopWhen: stepCountIs(3) });
    assert.equal(res.text, "You are alice.");
    assert.deepEqual(sent[1]?.body, { toolName: "whoami", args: { verbose: true }, callId: "call-1" });
    assert.match(JSON.stringify(prompts[1]), /alice/);
  });

  it("a tool that needs consent answers the model with the link", async () => {
    const { fetch } = scriptedFetch([
      json(200, manifest),
      json(200, {
        result: {
          status: "authorization_required",
          authorization: {
            authSessionId: "as-1",
            authorizationUrl: "http://provider.test/auth",
            message: "Connect.",
          },
        },
      }),
    ]);
    const tools = await aiTools(client(fetch));
    const out = (await tools.whoami?.execute?.({}, { toolCallId: "c", messages: [] })) as Record<
      string,
      unknown
    >;
    assert.equal(out.status, "authorization_required");
    assert.equal(out.authorizationUrl, "http://provider.test/auth");
  });

  it("filter, a tool without a schema, and an onAuthorizationRequired that ends the generation", async () => {
    const { fetch } = scriptedFetch([
      json(200, {
        result: {
          status: "authorization_required",
          authorization: { authSessionId: "as-1", authorizationUrl: "http://provider.test/auth" },
        },
      }),
    ]);
    const c = client(fetch);
    const tools = toAiTools(
      c,
      [
        { tool_id: "a:one", name: "one", description: "no schema" },
        { tool_id: "a:two", name: "two", description: "filtered out" },
      ],
      {
        filter: (e) => e.name !== "two",
        onAuthorizationRequired: (req) => {
          throw req;
        },
      },
    );
    assert.deepEqual(Object.keys(tools), ["one"]);
    await assert.rejects(
      Promise.resolve(tools.one?.execute?.({}, { toolCallId: "c", messages: [] })),
      AuthorizationRequired,
    );
  });
});
