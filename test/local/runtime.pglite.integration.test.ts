/**
 * The local runtime as a real process with no database configured: the embedded PGlite under `.queuebox/` in the
 * working directory is created and migrated at start, a webhook is accepted and delivered, and the data outlives a
 * restart (the same webhook-id is a duplicate afterwards); the CLI is refused on the data directory while the runtime
 * holds it. Also: an invalid configuration exits 1 with the issues.
 */
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  baseUrlOf,
  cleanup,
  postWebhook,
  type Receiver,
  runQueueBoxCli,
  startQueueBox,
  startReceiver,
  tempDir,
  testConfigYaml,
} from './support.ts';

// PGlite (PostgreSQL in WebAssembly) takes 15–20 s to create and migrate its data directory on a loaded 2-core machine.
describe('local runtime on the embedded PGlite (real process)', { timeout: 120_000 }, () => {
  let receiver: Receiver;
  let dir: string;

  beforeAll(async () => {
    receiver = await startReceiver();
    dir = await tempDir();
  });

  afterAll(async () => {
    await cleanup();
    await receiver?.close();
  });

  it('creates and migrates .queuebox/pglite, accepts a webhook and delivers it; SIGTERM exits 0', async () => {
    const queuebox = await startQueueBox({ yaml: testConfigYaml({ receiverUrl: receiver.url }), dir });
    const base = await baseUrlOf(queuebox);

    const answer = await postWebhook(`${base}/inbox/demo`, 'pglite-1', {
      type: 'order.created',
      data: { id: 'o-1' },
    });

    expect(queuebox.logs.find((l) => l.message === 'opening store')).toMatchObject({ provider: 'pglite' });
    expect(queuebox.logs.find((l) => l.message === 'migrations applied')?.applied).not.toEqual([]);
    const dataDir = await stat(join(dir, '.queuebox', 'pglite'));
    expect(dataDir.isDirectory()).toBe(true);
    // Only its owner may enter it (PGlite's own files are readable and writable by everyone).
    expect((dataDir.mode & 0o777).toString(8)).toBe('700');
    expect(((await stat(join(dir, '.queuebox'))).mode & 0o777).toString(8)).toBe('700');
    expect(answer).toMatchObject({ status: 202, body: { status: 'accepted' } });
    const [delivery] = await receiver.waitFor(1);
    expect(delivery?.headers['x-idempotency-key']).toBe('pglite-1');
    // A number a double cannot hold arrives with every digit (the store's json parsers, on PGlite too).
    const big = await postWebhook(`${base}/inbox/demo`, 'pglite-2', {
      type: 'order.created',
      data: {
        id: 'o-2',
        amount: (JSON as unknown as { rawJSON(text: string): unknown }).rawJSON('12345678901234567890123'),
      },
    });
    expect(big.status).toBe(202);
    const [, second] = await receiver.waitFor(2);
    expect(second?.body).toContain('"amount":12345678901234567890123');
    // The CLI on the same data directory would work on a copy of its own: it is refused while the runtime runs.
    const whileRunning = await runQueueBoxCli(['outbox', 'list'], { cwd: dir });
    expect(whileRunning.code).toBe(1);
    expect(whileRunning.stderr).toContain(`is in use by process ${queuebox.child.pid}.`);
    expect(await queuebox.stop('SIGTERM')).toBe(0);
    const afterwards = await runQueueBoxCli(['outbox', 'list', '--json'], { cwd: dir });
    expect(afterwards.code).toBe(0);
    expect(afterwards.stdout).toContain('"state":"sent"');
  });

  it('keeps its data across a restart: nothing left to migrate, the same webhook-id is a duplicate', async () => {
    const queuebox = await startQueueBox({ yaml: testConfigYaml({ receiverUrl: receiver.url }), dir });
    const base = await baseUrlOf(queuebox);

    const again = await postWebhook(`${base}/inbox/demo`, 'pglite-1', {
      type: 'order.created',
      data: { id: 'o-1' },
    });

    expect(queuebox.logs.find((l) => l.message === 'migrations applied')?.applied).toEqual([]);
    expect(again).toEqual({ status: 200, body: { status: 'duplicate' } });
    expect(await queuebox.stop('SIGINT')).toBe(0);
  });

  it('returns the claims a killed process left at its next start, instead of after their 5-minute lease', async () => {
    // Prepare: rows as a process killed mid-claim leaves them in the data directory: an outbox row and a relay
    // (inbox) row processing, each under a lease that ends in 5 minutes.
    // (Nothing runs on the directory now: the tests before stopped their runtimes.)
    const db = await PGlite.create({ dataDir: join(dir, '.queuebox', 'pglite') });
    try {
      const lease = `'processing', gen_random_uuid(), now() + interval '5 minutes'`;
      await db.query(
        `INSERT INTO queuebox.outbox (topic, payload, max_attempts, state, claim_token, lease_until)
         VALUES ('demo.orphan.outbox', '{"orphan":"outbox"}', 5, ${lease})`,
      );
      await db.query(
        `INSERT INTO queuebox.inbox (source, idempotency_key, event_type, payload, max_attempts, state, claim_token, lease_until)
         VALUES ('demo', 'orphan-inbox', 'orphan.inbox', '{"orphan":"inbox"}', 5, ${lease})`,
      );
    } finally {
      await db.close();
    }
    const before = receiver.deliveries.length;

    // Act
    const queuebox = await startQueueBox({ yaml: testConfigYaml({ receiverUrl: receiver.url }), dir });

    // Assess: both delivered within seconds; the start says what it released.
    await receiver.waitFor(before + 2);
    const bodies = receiver.deliveries.slice(before).map((d) => d.body);
    expect(bodies).toEqual(
      expect.arrayContaining([
        expect.stringContaining('"orphan":"outbox"'),
        expect.stringContaining('"orphan":"inbox"'),
      ]),
    );
    expect(queuebox.logs.find((l) => l.message === 'claims of a previous process released')).toMatchObject({
      outbox: 1,
      inbox: 1,
    });
    expect(await queuebox.stop('SIGTERM')).toBe(0);
  });

  it('refuses an invalid configuration: exit 1 and one log line naming every problem', async () => {
    const yaml = testConfigYaml({ receiverUrl: receiver.url })
      .replace('outbox:\n', 'outbox:\n  maxAttempts: 0\n')
      .replace('destination: receiver', 'destination: nowhere');
    const queuebox = await startQueueBox({ yaml });

    const code = await queuebox.exited;

    expect(code).toBe(1);
    const failure = queuebox.logs.find((l) => l.message === 'invalid configuration; QueueBox does not start');
    const paths = (failure?.issues as { path: string }[] | undefined)?.map((i) => i.path);
    expect(paths).toEqual(expect.arrayContaining(['outbox.maxAttempts', 'routes[0].destination']));
  });
});
