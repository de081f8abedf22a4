// Drives one mastif A2A agent with the official A2A JavaScript SDK (@a2a-js/sdk 1.x, A2A v1.0).
// usage: node a2a.mjs <agent URL exactly as mastif hands it out> <bearer token>
// Prints one JSON object: {check name: what the SDK saw}; tests/protocols/test_interop.py asserts on it.
// The agent's model is scripted on the Python side: text "wait" blocks until cancelled,
// any other text is answered at once.
import { randomUUID } from 'node:crypto';
import { Role, TaskState } from '@a2a-js/sdk';
import {
  ClientFactory,
  ClientFactoryOptions,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
} from '@a2a-js/sdk/client';
import { authFetchFor, checks } from './common.mjs';

const [agentUrl, token] = process.argv.slice(2);
const { fetched, authFetch } = authFetchFor(token);
const { out, check, print } = checks((err) => err?.envelopeCode ?? err?.code ?? null);
const stateName = (state) => TaskState[state] ?? String(state);
const message = (text) => ({
  messageId: randomUUID(),
  contextId: 'interop',
  taskId: '',
  role: Role.ROLE_USER,
  parts: [
    { content: { $case: 'text', value: text } },
    { content: { $case: 'data', value: { step: 1 } } },
  ],
  metadata: undefined,
  extensions: [],
  referenceTaskIds: [],
});
const send = (text, returnImmediately) => ({
  tenant: '',
  message: message(text),
  configuration: {
    acceptedOutputModes: ['text/plain'],
    taskPushNotificationConfig: undefined,
    returnImmediately,
  },
  metadata: undefined,
});
const taskView = (task) => ({
  kind: task.id ? 'task' : 'message',
  id: task.id,
  contextId: task.contextId,
  state: stateName(task.status?.state),
  answer: (task.artifacts ?? [])
    .flatMap((a) => a.parts)
    .map((p) => (p.content?.$case === 'text' ? p.content.value : ''))
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
  client = await factory.createFromUrl(agentUrl); // exactly as a stock client starts
  const card = await client.getAgentCard();
  return {
    card_url: fetched[0],
    name: card.name,
    interfaces: card.supportedInterfaces.map((i) => ({
      url: i.url,
      binding: i.protocolBinding,
      version: i.protocolVersion,
    })),
    skills: card.skills.map((s) => s.id),
    protocol: client.protocolVersion,
  };
});

if (client) {
  let done;
  let parked;
  await check('send_message', async () => {
    done = await client.sendMessage(send('hello', false));
    return taskView(done);
  });
  await check('get_task', async () =>
    taskView(await client.getTask({ tenant: '', id: done.id, historyLength: 10 })),
  );
  await check('send_message_return_immediately', async () => {
    parked = await client.sendMessage(send('wait', true));
    return taskView(parked);
  });
  // the agent's work has begun once the task reads WORKING (the server runs it after answering)
  await check('working', async () => {
    for (let i = 0; i < 100; i++) {
      const task = await client.getTask({ tenant: '', id: parked.id });
      if (task.status?.state === TaskState.TASK_STATE_WORKING) return taskView(task);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    throw new Error('the parked task never reached WORKING');
  });
  await check('list_tasks', async () => {
    const page = await client.listTasks({
      tenant: '',
      contextId: 'interop',
      status: TaskState.TASK_STATE_UNSPECIFIED,
      pageToken: '',
    });
    return { ids: page.tasks.map((t) => t.id).sort(), states: page.tasks.map((t) => stateName(t.status?.state)).sort() };
  });
  await check('cancel_task', async () =>
    taskView(await client.cancelTask({ tenant: '', id: parked.id, metadata: undefined })),
  );
  await check('get_task_after_cancel', async () =>
    taskView(await client.getTask({ tenant: '', id: parked.id })),
  );
  await check('cancel_completed_task', async () =>
    taskView(await client.cancelTask({ tenant: '', id: done.id, metadata: undefined })),
  );
  await check('get_unknown_task', async () =>
    taskView(await client.getTask({ tenant: '', id: 'no-such-task' })),
  );
  out.ids = { done: done?.id, parked: parked?.id };
}

// requests no SDK would send: what the endpoint answers on the wire
const rpcUrl = out.discovery?.interfaces?.[0]?.url ?? agentUrl;
async function raw(name, body, version = '1.0') {
  await check(name, async () => {
    const headers = { 'Content-Type': 'application/json' };
    if (version) headers['A2A-Version'] = version;
    const response = await authFetch(rpcUrl, { method: 'POST', headers, body });
    const text = await response.text();
    let json = null;
    try {
      json = JSON.parse(text);
    } catch {}
    return { status: response.status, id: json?.id, code: json?.error?.code ?? null };
  });
}
await raw('malformed_json', '{"jsonrpc": "2.0", "method": ');
await raw('unknown_method', JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'NoSuchMethod', params: {} }));
await raw('no_jsonrpc_member', JSON.stringify({ id: 8, method: 'GetTask', params: { id: 'x' } }));
// a v1.0 method without the A2A-Version header: the spec reads a missing header as 0.3
await raw('v1_method_without_version_header', JSON.stringify({ jsonrpc: '2.0', id: 10, method: 'GetTask', params: { id: 'x' } }), null);
await raw('invalid_params', JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'GetTask', params: { id: 5, bogus: [] } }));

// where the spec says clients look first: the origin root (all agents share the origin)
await check('origin_root_card', async () => {
  const response = await authFetch(new URL('/.well-known/agent-card.json', agentUrl));
  return { status: response.status, text: await response.text() };
});

print();
