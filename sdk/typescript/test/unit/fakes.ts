// Hand-written fakes of the HTTP layer: a fetch that answers from a
// script and records what it was sent, and a local node:http server for
// the tests that need a real connection (streams, cuts).

import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { AgentauthClient, type ClientOptions } from "../../src/index.js";

export interface Sent {
  method: string;
  url: URL;
  headers: Record<string, string>;
  body: unknown;
}

export type Answer = Response | ((req: Sent) => Response | Promise<Response>);

export function json(status: number, body: unknown, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(body), {
    status,
    headers: { "Content-Type": "application/json", "X-Request-Id": "req-header", ...headers },
  });
}

/** A fetch that answers each request with the next answer, recording the requests. */
export function scriptedFetch(answers: Answer[]): { fetch: ClientOptions["fetch"]; sent: Sent[] } {
  const sent: Sent[] = [];
  const fetch = async (input: string, init: RequestInit): Promise<Response> => {
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries((init.headers as Record<string, string>) ?? {})) {
      headers[k.toLowerCase()] = v;
    }
    const req: Sent = {
      method: init.method ?? "GET",
      url: new URL(input),
      headers,
      body: typeof init.body === "string" ? JSON.parse(init.body) : undefined,
    };
    sent.push(req);
    const a = answers.shift();
    if (!a) {
      throw new Error(`unexpected request ${req.method} ${req.url}`);
    }
    return typeof a === "function" ? a(req) : a;
  };
  return { fetch, sent };
}

export function client(fetch: ClientOptions["fetch"], opts: ClientOptions = {}): AgentauthClient {
  return new AgentauthClient({
    url: "http://agentauth.test",
    runtimeToken: "aat_runtime",
    agentToken: "agent.jwt.value",
    env: false,
    fetch,
    retryBaseMs: 1,
    ...opts,
  });
}

/** A local HTTP server; handler answers each request. */
export async function serve(
  handler: (req: IncomingMessage, res: ServerResponse) => void,
): Promise<{ url: string; server: Server; close: () => Promise<void> }> {
  const server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    server,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
