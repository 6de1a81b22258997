import type { NewOutboxMessage } from '@queuebox/core';
import { requireServices, useTestStore } from '@queuebox/testing';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { SettledOutboxRow } from '../src/poller.ts';
import { aHooksPoller } from './support/hooks-poller.ts';
import { type HttpReceiver, startHttpReceiver } from './support/http-receiver.ts';

const needs = await requireServices('poller onSettled', ['postgres']);

const aMessage = (over: Partial<NewOutboxMessage> = {}): NewOutboxMessage => ({
  topic: 'orders.created',
  payload: { n: 1 },
  maxAttempts: 5,
  ...over,
});

describe.skipIf(needs.skipReason)('createOutboxPoller onSettled', () => {
  // The store in a schema of the file's own, dropped after the file (kept and named when a test failed).
  const db = useTestStore('outbox_settled', { url: needs.url.postgres, storePoolSize: 2 });
  let receiver: HttpReceiver;

  beforeAll(async () => {
    receiver = await startHttpReceiver();
  });
  afterAll(async () => {
    await receiver?.close();
  });

  const aPoller = (onSettled: (rows: readonly SettledOutboxRow[]) => void) =>
    aHooksPoller(db.store.outbox, receiver.url, { onSettled });

  it('reports each settled row once with its outcome, destination and the claimed row', async () => {
    receiver.handle((request, response) => {
      const status = JSON.parse(request.body).n === 2 ? 503 : 204;
      response.writeHead(status).end();
    });
    const [sent, retried, dead] = await db.store.outbox.insert([
      aMessage({ payload: { n: 1 } }),
      aMessage({ payload: { n: 2 } }),
      aMessage({ topic: 'unrouted.topic' }),
    ]);
    const seen: SettledOutboxRow[] = [];
    const { poller, close } = aPoller((rows) => seen.push(...rows));
    const before = Date.now();

    try {
      const report = await poller.drain({ deadline: Date.now() + 10_000 });
      expect(report).toMatchObject({ sent: 1, retried: 1, dead: 1 });
    } finally {
      await close();
    }

    const byId = Object.fromEntries(seen.map((s) => [s.row.id, s]));
    expect(seen).toHaveLength(3);
    expect(byId[sent as string]).toMatchObject({ outcome: 'sent', destination: 'hooks' });
    expect(byId[retried as string]).toMatchObject({ outcome: 'retried', destination: 'hooks' });
    expect(byId[dead as string]).toMatchObject({ outcome: 'dead', destination: null });
    for (const s of seen) {
      expect(s.settledAt).toBeGreaterThanOrEqual(before);
      expect(s.row.createdAt).toBeInstanceOf(Date);
    }
  });

  it("times each row's latency on the database's clock to its claim, then on this process's, however far apart", async () => {
    // Prepare: this process's wall clock four minutes ahead of the database's
    receiver.handle((_request, response) => {
      response.writeHead(204).end();
    });
    const [id] = await db.store.outbox.insert([aMessage({ payload: { n: 4 } })]);
    const real = Date.now.bind(Date);
    vi.spyOn(Date, 'now').mockImplementation(() => real() + 240_000);
    const seen: SettledOutboxRow[] = [];
    const { poller, close } = aPoller((rows) => seen.push(...rows));
    const started = performance.now();

    try {
      await poller.drain({ deadline: Date.now() + 10_000 });
    } finally {
      vi.restoreAllMocks();
      await close();
    }

    // Assess: what really passed (well under the drain's own time), not the four minutes between the clocks
    const mine = seen.find((s) => s.row.id === id);
    expect(mine?.outcome).toBe('sent');
    expect(mine?.latencyMs).toBeGreaterThanOrEqual(0);
    expect(mine?.latencyMs).toBeLessThan(performance.now() - started + 5_000);
    expect((mine?.settledAt ?? 0) - (mine?.row.createdAt.getTime() ?? 0)).toBeGreaterThan(200_000);
  });

  it('ignores an observer that throws', async () => {
    receiver.handle((_request, response) => {
      response.writeHead(204).end();
    });
    await db.store.outbox.insert([aMessage({ payload: { n: 3 } })]);
    const { poller, close } = aPoller(() => {
      throw new Error('observer failed');
    });

    try {
      const report = await poller.drain({ deadline: Date.now() + 10_000 });
      expect(report.sent).toBeGreaterThanOrEqual(1);
    } finally {
      await close();
    }
  });
});
