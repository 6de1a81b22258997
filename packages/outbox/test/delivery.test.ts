/**
 * The per-key order of one batch's delivery, without a database: rows of one key are delivered in id order, and
 * once one of them is given back untried the rows behind it are given back too, untried. (A store's claim hands out
 * one row of a key at a time, so the poller tests on PostgreSQL never put two rows of a key in one batch.)
 */
import type { ClaimedOutboxRow, OutgoingMessage, Publisher } from '@queuebox/core';
import { MessageState } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import { createDelivery } from '../src/delivery.ts';
import { compileTargets } from '../src/targets.ts';

const anOutboxRow = (id: string, topic: string, key: string | null): ClaimedOutboxRow => {
  const at = new Date('2026-11-30T12:00:00Z');
  return {
    id,
    topic,
    key,
    payload: { id },
    headers: {},
    state: MessageState.Processing,
    attempt: 0,
    maxAttempts: 10,
    scheduledAt: at,
    claimToken: 'token',
    leaseUntil: new Date(at.getTime() + 30_000),
    createdAt: at,
    updatedAt: at,
    sentAt: null,
    lastError: null,
    destination: null,
    messageId: `message-${id}`,
  };
};

describe('createDelivery: the order of a key', () => {
  it('gives back the later rows of a key untried when an earlier one is given back unstarted', async () => {
    // Prepare: the first row of key order-1 goes to a destination whose connections are all busy, the second to
    // one that would take it at once.
    const targetOf = compileTargets({
      routes: [
        { match: 'busy.#', destination: 'busy' },
        { match: 'orders.#', destination: 'hooks' },
      ],
      destinations: {
        busy: { type: 'http', url: 'http://busy.invalid/' },
        hooks: { type: 'http', url: 'http://hooks.invalid/' },
      },
    });
    const published: string[] = [];
    const publishers: Record<string, Publisher> = {
      busy: {
        publish: async () => ({ kind: 'retry', error: 'no free connection', unstarted: true }),
        close: async () => undefined,
      },
      hooks: {
        publish: async (message: OutgoingMessage) => {
          published.push(message.id);
          return { kind: 'sent' };
        },
        close: async () => undefined,
      },
    };
    const delivery = createDelivery({
      targetOf,
      publishers: (destination) => publishers[destination],
      random: () => 0.5,
    });
    const rows = [
      anOutboxRow('1', 'busy.order', 'order-1'),
      anOutboxRow('2', 'orders.created', 'order-1'),
      anOutboxRow('3', 'orders.created', 'order-2'),
    ];

    // Act
    const verdicts = await delivery.deliverBatch(rows, { signal: new AbortController().signal });

    // Assess: the row of the other key is delivered.
    expect(verdicts.get('1')).toEqual({ kind: 'release' });
    expect(verdicts.get('2')).toEqual({ kind: 'release' });
    expect(verdicts.get('3')).toEqual({ kind: 'sent', destination: 'hooks' });
    expect(published).toEqual(['message-3']);
  });
});
