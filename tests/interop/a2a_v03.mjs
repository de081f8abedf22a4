// Drives one mastif A2A agent with the A2A v0.3 JavaScript SDK (@a2a-js/sdk 0.3.x, installed
// as the npm alias a2a-sdk-v03): what the many deployed v0.3 clients do.
// usage: node a2a_v03.mjs <agent URL exactly as mastif hands it out> <bearer token>
// Prints one JSON object: {check name: what the SDK saw}; tests/protocols/test_interop.py asserts on it.
// The agent's work is scripted on the Python side: "wait" blocks until cancelled.
import { randomUUID } from 'node:crypto';
import { ClientFactory, ClientFactoryOptions, DefaultAgentCardResolver, JsonRpcTransportFactory } from 'a2a-sdk-v03/client';
import { authFetchFor, checks } from './common.mjs';

const [agentUrl, token] = process.argv.slice(2);
const { fetched, authFetch } = authFetchFor(token);
const { out, check, print } = checks((err) => err?.errorResponse?.error?.code ?? err?.code ?? null);
const send = (text, blocking) => ({
  message: {
    kind: 'message',
    messageId: randomUUID(),
    contextId: 'interop-v03',
    role: 'user',
    parts: [
      { kind: 'text', text },
      { kind: 'data', data: { step: 1 } },
    ],
  },
  configuration: { blocking, acceptedOutputModes: ['text/plain'] },
});
const taskView = (task) => ({
  kind: task.kind,
  id: task.id,
  contextId: task.contextId,
  state: task.status?.state,
  answer: (task.artifacts ?? [])
    .flatMap((a) => a.parts)
    .map((p) => (p.kind === 'text' ? p.text : ''))
    .join(''),
});

const factory = new ClientFactory(
  ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    transports: [new JsonRpcTransportFactory({ fetchImpl: authFetch })],
    cardResolver: new DefaultAgentCardResolver({ fetchImpl: authFetch }),
  }),
);

let client;
await check('discovery', async () => {
  client = await factory.createFromUrl(agentUrl);
  const card = await client.getAgentCard();
  return {
    card_url: fetched[0],
    name: card.name,
    url: card.url,
    protocolVersion: card.protocolVersion,
    preferredTransport: card.preferredTransport,
    skills: card.skills.map((s) => s.id),
  };
});
if (client) {
  let done;
  let parked;
  await check('send_message', async () => {
    done = await client.sendMessage(send('hello', true));
    return taskView(done);
  });
  await check('get_task', async () => taskView(await client.getTask({ id: done.id })));
  await check('send_message_nonblocking', async () => {
    parked = await client.sendMessage(send('wait', false));
    return taskView(parked);
  });
  await check('working', async () => {
    for (let i = 0; i < 100; i++) {
      const task = await client.getTask({ id: parked.id });
      if (task.status?.state === 'working') return taskView(task);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    throw new Error('the parked task never reached working');
  });
  await check('cancel_task', async () => taskView(await client.cancelTask({ id: parked.id })));
  await check('cancel_completed_task', async () => taskView(await client.cancelTask({ id: done.id })));
  await check('get_unknown_task', async () => taskView(await client.getTask({ id: 'no-such-task' })));
  out.ids = { done: done?.id, parked: parked?.id };
}
// a v0.3 request no SDK would send: message/send without a message
await check('invalid_request', async () => {
  const response = await authFetch(out.discovery?.url ?? agentUrl, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 11, method: 'message/send', params: {} }),
  });
  const json = await response.json();
  return { status: response.status, id: json.id, code: json.error?.code ?? null };
});
print();
