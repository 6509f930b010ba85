// The basic custom-tool flow through the official TypeScript SDK against a real `mast serve`,
// on SQLite and (when the run has a cluster) Postgres. MAST_TS_SDK names the package to test:
// `@anthropic-ai/sdk` (the oldest release Mast supports) or `anthropic-sdk-newest` (the newest,
// installed under that alias beside it), so one lock file pins both.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import net from 'node:net';

const SDK = process.env.MAST_TS_SDK ?? '@anthropic-ai/sdk';
const { default: Anthropic } = await import(SDK);

const MAST_BIN = process.env.MAST_BIN ?? '../../../target/debug/mast';
const PG = process.env.MAST_TEST_DATABASE_URL;

function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

async function startMast(backend) {
  const port = await freePort();
  const env = { ...process.env, MAST_LOG: 'warn' };
  delete env.DATABASE_URL;
  if (backend === 'postgres') {
    const name = `mast_ts_${Math.random().toString(36).slice(2, 12)}`;
    execFileSync('psql', [PG, '-q', '-c', `CREATE DATABASE ${name}`]);
    env.DATABASE_URL = PG.replace(/\/[^/]*$/, `/${name}`);
  }
  const dataDir = mkdtempSync(join(tmpdir(), 'mast-ts-'));
  const proc = spawn(MAST_BIN, ['serve', '--listen', `127.0.0.1:${port}`, '--data-dir', dataDir], { env, stdio: 'inherit' });
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 300; i++) {
    try {
      if ((await fetch(`${base}/healthz`)).ok) return { base, proc };
    } catch {}
    await new Promise((r) => setTimeout(r, 50));
  }
  proc.kill();
  throw new Error('mast did not start');
}

for (const backend of PG ? ['sqlite', 'postgres'] : ['sqlite']) {
  test(`custom tool round trip through the TypeScript SDK (${backend})`, async () => {
    const { base, proc } = await startMast(backend);
    try {
      const client = new Anthropic({ baseURL: base, apiKey: 'ts-test', maxRetries: 0 });
      const agent = await client.beta.agents.create({
        name: 'weather',
        model: 'mast-scripted',
        tools: [{ type: 'custom', name: 'get_weather', description: 'Current weather for a city.',
          input_schema: { type: 'object', properties: { city: { type: 'string' } } } }],
      });
      assert.equal(agent.version, 1);
      const env = await client.beta.environments.create({ name: `ts-${Date.now()}` });
      const session = await client.beta.sessions.create({ agent: agent.id, environment_id: env.id });
      assert.equal(session.status, 'idle');

      const stream = await client.beta.sessions.events.stream(session.id);
      await client.beta.sessions.events.send(session.id, {
        events: [{ type: 'user.message', content: [{ type: 'text', text: 'call get_weather {"city":"Paris"}\n---\nsay It is {{result}} in Paris.' }] }],
      });
      let pending;
      let final;
      for await (const ev of stream) {
        if (ev.type === 'agent.custom_tool_use') pending = ev;
        if (ev.type === 'agent.message') final = ev;
        if (ev.type === 'session.status_idle') {
          if (ev.stop_reason.type === 'requires_action') {
            assert.deepEqual(ev.stop_reason.event_ids, [pending.id]);
            await client.beta.sessions.events.send(session.id, {
              events: [{ type: 'user.custom_tool_result', custom_tool_use_id: pending.id, content: [{ type: 'text', text: 'sunny' }] }],
            });
          } else {
            assert.equal(ev.stop_reason.type, 'end_turn');
            break;
          }
        }
      }
      assert.deepEqual(pending.input, { city: 'Paris' });
      assert.equal(final.content[0].text, 'It is sunny in Paris.');
      const ids = [];
      for await (const ev of client.beta.sessions.events.list(session.id, { limit: 3 })) ids.push(ev.id);
      assert.ok(ids.length >= 10, `auto-pagination walked the log (${ids.length} events)`);
      await assert.rejects(client.beta.agents.retrieve('agent_missing'), Anthropic.NotFoundError);
    } finally {
      proc.kill('SIGTERM');
    }
  });
}
