import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { AgentauthClient, MissingCredentialError } from "../../src/index.js";
import { json, scriptedFetch } from "./fakes.js";

const credentials = { accessKeyId: "AKIDEXAMPLE", secretAccessKey: "secret", sessionToken: "session" };

describe("sigv4", () => {
  it("signs runtime routes for execute-api and streams for lambda, tool routes take the JWT", async () => {
    const { fetch, sent } = scriptedFetch([
      json(200, { data: [], unreadable: [] }),
      new Response(
        'id: 0\nevent: turn.completed\ndata: {"turnId":"t","seq":0,"type":"turn.completed","at":"x"}\n\n',
        {
          headers: { "Content-Type": "text/event-stream" },
        },
      ),
      json(200, { data: [] }),
    ]);
    const c = new AgentauthClient({
      env: {
        AGENTAUTH_URL: "http://127.0.0.1:4566/_aws/execute-api/abc123/$default",
        AGENTAUTH_STREAM_URL: "http://127.0.0.1:4566/_aws/lambda-url/xyz/",
        AGENTAUTH_AUTH: "sigv4",
        AWS_REGION: "us-east-1",
        AGENTAUTH_AGENT_TOKEN: "agent.jwt",
      },
      credentials,
      fetch,
    });
    await c.listInstances();
    for await (const _ of c.followTurn("default", "k", "assistant", "t")) {
      // one event
    }
    await c.listTools();
    const [api, stream, tools] = sent;
    assert.equal(api?.url.pathname, "/_aws/execute-api/abc123/$default/v1/instances");
    assert.match(
      api?.headers.authorization ?? "",
      /^AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE\/\d{8}\/us-east-1\/execute-api\/aws4_request, SignedHeaders=[^,]*host[^,]*, Signature=[0-9a-f]{64}$/,
    );
    assert.equal(api?.headers["x-amz-security-token"], "session");
    assert.ok(api?.headers["x-amz-date"]);
    assert.equal(api?.headers.host, undefined, "fetch sets Host itself");
    assert.equal(
      stream?.url.toString(),
      "http://127.0.0.1:4566/_aws/lambda-url/xyz/v1/instances/default/k/assistant/turns/t/events",
    );
    assert.match(stream?.headers.authorization ?? "", /\/us-east-1\/lambda\/aws4_request/);
    assert.equal(tools?.headers.authorization, "Bearer agent.jwt");
  });

  it("a missing region is named", async () => {
    const { fetch } = scriptedFetch([]);
    const c = new AgentauthClient({ url: "http://x.test", auth: "sigv4", env: {}, credentials, fetch });
    await assert.rejects(c.listInstances(), (e: unknown) => {
      assert.ok(e instanceof MissingCredentialError);
      assert.match(e.message, /AWS_REGION/);
      return true;
    });
  });

  it("credentials from a provider function; a failing provider is a MissingCredentialError", async () => {
    const { fetch, sent } = scriptedFetch([
      json(200, { data: [], unreadable: [] }),
      json(200, { data: [], unreadable: [] }),
    ]);
    let asked = 0;
    const ok = new AgentauthClient({
      url: "http://x.test",
      auth: "sigv4",
      region: "eu-west-1",
      env: {},
      credentials: async () => {
        asked++;
        return credentials;
      },
      fetch,
    });
    await ok.listInstances();
    await ok.listInstances();
    assert.match(sent[0]?.headers.authorization ?? "", /eu-west-1\/execute-api/);
    assert.match(sent[1]?.headers.authorization ?? "", /eu-west-1\/execute-api/);
    assert.equal(asked, 1, "one signer, its credentials asked once, for the client's requests");
    const bad = new AgentauthClient({
      url: "http://x.test",
      auth: "sigv4",
      region: "eu-west-1",
      env: {},
      credentials: async () => {
        throw new Error("no credentials in the chain");
      },
      fetch,
    });
    await assert.rejects(bad.listInstances(), MissingCredentialError);
  });
});
