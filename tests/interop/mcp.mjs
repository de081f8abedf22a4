// Drives mastif's MCP tool server with the official MCP TypeScript SDK (1.x client,
// StreamableHTTPClientTransport).
// usage: node mcp.mjs <endpoint URL exactly as mastif hands it out> <bearer token>
// Prints one JSON object: {check name: what the SDK saw}; tests/protocols/test_interop.py asserts on it.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { checks } from './common.mjs';

const [endpoint, token] = process.argv.slice(2);
const auth = { Authorization: `Bearer ${token}` };
const { out, check, print } = checks();
const textOf = (result) => result.content.map((c) => (c.type === 'text' ? c.text : `[${c.type}]`)).join('');

const transport = new StreamableHTTPClientTransport(new URL(endpoint), { requestInit: { headers: auth } });
const client = new Client({ name: 'mastif-interop', version: '1.0.0' });

await check('initialize', async () => {
  await client.connect(transport);
  return {
    server: client.getServerVersion(),
    protocol: transport.protocolVersion ?? null,
    capabilities: client.getServerCapabilities(),
    session: Boolean(transport.sessionId),
  };
});
await check('tools_list', async () => (await client.listTools()).tools);
await check('call_valid', async () => {
  const result = await client.callTool({
    name: 'json_parser',
    arguments: { json_string: '{"a": [1, 2, 3]}', query: 'a[2]' },
  });
  return { isError: Boolean(result.isError), text: textOf(result) };
});
await check('call_invalid_arguments', async () => {
  const result = await client.callTool({ name: 'json_parser', arguments: { query: 7 } });
  return { isError: Boolean(result.isError), text: textOf(result) };
});
await check('call_unknown_tool', async () => {
  const result = await client.callTool({ name: 'no_such_tool', arguments: {} });
  return { isError: Boolean(result.isError), text: textOf(result) };
});

// requests no SDK would send, on the live session: what the endpoint answers on the wire
const sessionId = transport.sessionId;
async function raw(name, body, { session = sessionId } = {}) {
  await check(name, async () => {
    const headers = {
      ...auth,
      'Content-Type': 'application/json',
      Accept: 'application/json, text/event-stream',
      'MCP-Protocol-Version': out.initialize?.protocol ?? '2025-11-25',
    };
    if (session) headers['Mcp-Session-Id'] = session;
    const response = await fetch(endpoint, { method: 'POST', headers, body });
    const text = await response.text();
    // one JSON object, or the first data event of an SSE stream
    const data = text.trimStart().startsWith('{') ? text : (text.match(/^data: ?(.*)$/m) ?? [])[1];
    let json = null;
    try {
      json = JSON.parse(data);
    } catch {}
    return { status: response.status, id: json?.id ?? null, code: json?.error?.code ?? null };
  });
}
await raw('malformed_json', '{"jsonrpc": "2.0", "method": ');
await raw('unknown_method', JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'no/such/method', params: {} }));
await raw('no_jsonrpc_member', JSON.stringify({ id: 8, method: 'tools/list', params: {} }));

await check('session_end', async () => {
  await transport.terminateSession(); // DELETE with the session id
  return { session: transport.sessionId ?? null };
});
await raw('after_session_end', JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'tools/list', params: {} }));
await client.close();

print();
