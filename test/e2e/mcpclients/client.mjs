// A scripted MCP client on the official TypeScript SDK, driven by
// test/e2e/mcp_test.go.
//
// Usage: node client.mjs URL [--elicitation]
//
// The bearer token is read from MCP_BEARER_TOKEN (never argv, never
// printed). --elicitation declares the URL-mode elicitation capability at
// initialize. Operations are JSON lines on stdin:
//
//   {"op": "list"}
//   {"op": "call", "name": "whoami", "args": {}}
//
// and each gets one JSON line on stdout (after a first "connect" line):
// the tools, a call's isError, text and structuredContent, or a JSON-RPC
// error's code, message and data (with the URL elicitations of a -32042),
// plus the last HTTP status seen and the SDK call's time in "ms". The
// client makes no judgement: the assertions are the Go test's.
import { createInterface } from 'node:readline';
import { performance } from 'node:perf_hooks';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';

function emit(line) {
  process.stdout.write(JSON.stringify(line) + '\n');
}

// The HTTP status of the transport's last response and its challenge.
const seen = { status: null, challenge: null };
async function recordingFetch(input, init) {
  const res = await fetch(input, init);
  seen.status = res.status;
  seen.challenge = res.headers.get('www-authenticate');
  return res;
}

function errorLine(op, err, started) {
  const line = { op, ok: false, ms: performance.now() - started, httpStatus: seen.status, wwwAuthenticate: seen.challenge };
  if (err instanceof McpError) {
    line.error = { code: err.code, message: err.message, data: err.data ?? null };
    if (err.code === ErrorCode.UrlElicitationRequired && Array.isArray(err.data?.elicitations)) {
      line.elicitations = err.data.elicitations.map((e) => ({ mode: e.mode, url: e.url, id: e.elicitationId, message: e.message }));
    }
  } else {
    // StreamableHTTPError carries the HTTP status as its code.
    line.error = { type: err?.name ?? typeof err, code: err?.code ?? null, message: String(err?.message ?? err) };
  }
  return line;
}

async function main() {
  const args = process.argv.slice(2);
  if (args.length === 0 || args[0].startsWith('-')) {
    process.stderr.write('usage: node client.mjs URL [--elicitation] (token in MCP_BEARER_TOKEN, ops on stdin)\n');
    return 2;
  }
  const token = process.env.MCP_BEARER_TOKEN ?? '';
  const elicitation = args.slice(1).includes('--elicitation');
  const transport = new StreamableHTTPClientTransport(new URL(args[0]), {
    requestInit: token ? { headers: { Authorization: `Bearer ${token}` } } : undefined,
    fetch: recordingFetch,
  });
  const client = new Client({ name: 'agentauth-e2e-typescript', version: '0' },
    { capabilities: elicitation ? { elicitation: { url: {} } } : {} });

  let started = performance.now();
  try {
    await client.connect(transport);
  } catch (err) {
    emit(errorLine('connect', err, started));
    await transport.close().catch(() => {});
    return 0;
  }
  const info = client.getServerVersion();
  emit({ op: 'connect', ok: true, ms: performance.now() - started, protocolVersion: transport.protocolVersion ?? null,
    httpStatus: seen.status, server: info ? { name: info.name, version: info.version } : null });

  const rl = createInterface({ input: process.stdin, crlfDelay: Infinity });
  for await (const raw of rl) {
    if (!raw.trim()) continue;
    const req = JSON.parse(raw);
    started = performance.now();
    try {
      if (req.op === 'list') {
        const res = await client.listTools();
        emit({ op: 'list', ok: true, ms: performance.now() - started, httpStatus: seen.status,
          tools: res.tools.map((t) => ({ name: t.name, description: t.description, inputSchema: t.inputSchema })) });
      } else if (req.op === 'call') {
        const res = await client.callTool({ name: req.name, arguments: req.args ?? {} });
        const text = (res.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('');
        emit({ op: 'call', ok: true, ms: performance.now() - started, httpStatus: seen.status,
          isError: Boolean(res.isError), text, structuredContent: res.structuredContent ?? null });
      } else {
        emit({ op: req.op, ok: false, error: { type: 'usage', message: 'unknown op' } });
      }
    } catch (err) {
      emit(errorLine(req.op, err, started));
    }
  }
  await client.close();
  return 0;
}

process.exitCode = await main();
