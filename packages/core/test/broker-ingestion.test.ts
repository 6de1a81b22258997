import { describe, expect, it } from 'vitest';
import {
  type BrokerIngestionPort,
  type BrokerIngestResult,
  type BrokerMessage,
  ingestInOrder,
} from '../src/index.ts';

const aMessage = (text: string): BrokerMessage => ({ body: new TextEncoder().encode(text), headers: {} });

/** A port that answers from a script, in order, and records what it was asked. */
function aScriptedPort(answers: readonly (BrokerIngestResult | Error)[]) {
  const calls: { source: string; body: string }[] = [];
  const port: BrokerIngestionPort = {
    async ingest(source, message) {
      calls.push({ source, body: new TextDecoder().decode(message.body) });
      const answer = answers[calls.length - 1];
      if (answer === undefined || answer instanceof Error) throw answer ?? new Error('no answer scripted');
      return answer;
    },
  };
  return { port, calls };
}

describe('ingestInOrder', () => {
  it('ingests every delivery in order and counts the outcomes', async () => {
    // Prepare
    const { port, calls } = aScriptedPort([
      { status: 'stored', id: '1', wakeRelay: false },
      { status: 'duplicate', id: '1', wakeRelay: false },
      { status: 'dead', id: '2', reason: 'not JSON', wakeRelay: false },
      { status: 'stored', id: '3', wakeRelay: true },
    ]);
    const deliveries = ['a', 'b', 'c', 'd'].map((q) => ({ queue: q, message: aMessage(q) }));
    const seen: string[] = [];
    // Act
    const report = await ingestInOrder(
      port,
      deliveries,
      (d) => `source-${d.queue}`,
      (result, d) => seen.push(`${d.queue}:${result.status}`),
    );
    // Assess
    expect(report).toEqual({ stored: 2, duplicate: 1, dead: 1, wakeRelay: true });
    expect(calls.map((c) => c.source)).toEqual(['source-a', 'source-b', 'source-c', 'source-d']);
    expect(seen).toEqual(['a:stored', 'b:duplicate', 'c:dead', 'd:stored']);
  });

  it('stops at the first failure and rejects with it', async () => {
    // Prepare
    const down = new Error('database unavailable');
    const { port, calls } = aScriptedPort([{ status: 'stored', id: '1', wakeRelay: false }, down]);
    const deliveries = ['a', 'b', 'c'].map((q) => ({ message: aMessage(q) }));
    // Act
    const outcome = ingestInOrder(port, deliveries, () => 's');
    // Assess
    await expect(outcome).rejects.toBe(down);
    expect(calls.map((c) => c.body)).toEqual(['a', 'b']);
  });

  it('rejects with what sourceOf throws, before ingesting that delivery', async () => {
    const { port, calls } = aScriptedPort([]);
    const unmapped = new Error('no source consumes it');
    const outcome = ingestInOrder(port, [{ message: aMessage('x') }], () => {
      throw unmapped;
    });
    await expect(outcome).rejects.toBe(unmapped);
    expect(calls).toEqual([]);
  });
});
