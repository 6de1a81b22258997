/** The batching publisher over a scripted service (no network): packing, per-entry outcomes, abort and close. */
import { getEventListeners } from 'node:events';
import type { OutgoingMessage } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import { type BatchServiceSpec, createBatchPublisher, type EntryResult } from '../src/index.ts';

let next = 1;
function aMessage(bytes = 10): OutgoingMessage {
  const id = String(next++);
  return { id, topic: 't', key: `k${id}`, payload: { pad: 'x'.repeat(bytes) }, headers: {}, attempt: 0 };
}

/** A service that records its requests and answers each entry with `answer`, after `delayMs`. */
function aService(
  overrides: Partial<BatchServiceSpec<string>> & {
    answer?: (entry: string) => EntryResult;
    delayMs?: number;
  } = {},
) {
  const requests: string[][] = [];
  let inFlight = 0;
  let mostInFlight = 0;
  const spec: BatchServiceSpec<string> = {
    name: 'd',
    service: 'Svc',
    maxEntries: 3,
    maxBatchBytes: 100,
    maxConcurrentRequests: 2,
    prepare: (m) => ({ bytes: JSON.stringify(m.payload).length, build: () => m.id }),
    async send(entries) {
      requests.push(entries.map((e) => e.entry));
      inFlight += 1;
      mostInFlight = Math.max(mostInFlight, inFlight);
      await new Promise((resolve) => setTimeout(resolve, overrides.delayMs ?? 5));
      inFlight -= 1;
      return new Map(entries.map((e) => [e.id, overrides.answer?.(e.entry) ?? { ok: true }]));
    },
    classify: (error) => ({ retryable: true, error: String(error) }),
    ...overrides,
  };
  return { spec, requests, mostInFlight: () => mostInFlight };
}

describe('batching publisher', () => {
  it('packs one turn of publishes by count and bytes, with at most maxConcurrentRequests in flight', async () => {
    // Prepare
    const { spec, requests, mostInFlight } = aService();
    const publisher = createBatchPublisher(spec);
    const messages = [aMessage(), aMessage(), aMessage(), aMessage(), aMessage(60), aMessage(60), aMessage()];

    // Act
    const outcomes = await Promise.all(messages.map((m) => publisher.publish(m)));

    // Assess
    expect(outcomes.every((o) => o.kind === 'sent')).toBe(true);
    // 20 + 20 + 20 bytes | 20 + 70 (another 70 would pass 100) | 70 + 20
    expect(requests.map((r) => r.length)).toEqual([3, 2, 2]);
    expect(mostInFlight()).toBe(2);
  });

  it('gives a row the prepare step refuses its dead outcome without a request', async () => {
    // Prepare
    const { spec, requests } = aService({ prepare: () => ({ dead: 'never fits' }) });
    const publisher = createBatchPublisher(spec);

    // Act
    const outcome = await publisher.publish(aMessage());

    // Assess
    expect(outcome).toEqual({ kind: 'dead', error: 'never fits' });
    expect(requests).toEqual([]);
  });

  it('retries a row the answer does not mention', async () => {
    // Prepare
    const { spec } = aService({ send: async () => new Map() });
    const publisher = createBatchPublisher(spec);

    // Act
    const outcome = await publisher.publish(aMessage());

    // Assess
    expect(outcome).toEqual({ kind: 'retry', error: 'Svc gave no result for the message (destination "d")' });
  });

  it('takes a waiting row back when its publish is aborted, and answers an aborted one at once', async () => {
    // Prepare
    const { spec, requests } = aService();
    const publisher = createBatchPublisher(spec);
    const abort = new AbortController();
    const before = new AbortController();
    before.abort();

    // Act
    const waiting = publisher.publish(aMessage(), abort.signal);
    abort.abort();
    const aborted = await publisher.publish(aMessage(), before.signal);
    const outcome = await waiting;
    await publisher.close();

    // Assess
    expect(outcome).toEqual({ kind: 'retry', error: 'aborted before publishing' });
    expect(aborted).toEqual({ kind: 'retry', error: 'aborted before publishing' });
    expect(requests).toEqual([]);
  });

  it('leaves no abort listener on a signal shared by many publishes once they settled', async () => {
    // Prepare: one long-lived signal, as a caller other than the poller (a batch's own signal) might pass
    const { spec } = aService({ answer: (entry) => (Number(entry) % 2 === 0 ? { ok: true } : failed()) });
    const publisher = createBatchPublisher(spec);
    const lifetime = new AbortController();

    // Act
    const outcomes = await Promise.all(
      Array.from({ length: 25 }, () => publisher.publish(aMessage(), lifetime.signal)),
    );
    await publisher.close();

    // Assess
    expect(outcomes).toHaveLength(25);
    expect(getEventListeners(lifetime.signal, 'abort')).toHaveLength(0);
  });

  it('sends what waits before close resolves, and retries publishes after it', async () => {
    // Prepare
    const { spec, requests } = aService({ delayMs: 20 });
    const publisher = createBatchPublisher(spec);

    // Act
    const pending = publisher.publish(aMessage());
    await publisher.close();
    const late = await publisher.publish(aMessage());

    // Assess
    expect(await pending).toEqual({ kind: 'sent' });
    expect(requests).toHaveLength(1);
    expect(late).toEqual({ kind: 'retry', error: 'the publisher of "d" is closed' });
  });
});

function failed(): EntryResult {
  return { ok: false, retryable: true, error: 'Throttled' };
}
