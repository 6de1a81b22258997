/**
 * The HTTP publisher serializes a payload once a connection is its own, not before it waits for one: rows queued
 * behind `maxConcurrency` requests (a batch of 200, two in flight) each held their serialized body while waiting,
 * which for a backlog of large payloads was every body at once. Real loopback server that holds its answers.
 */
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createHttpPublisher } from '../src/http-publisher.ts';

const held: ServerResponse[] = [];
let arrived: () => void = () => {};
const server = createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    held.push(res);
    arrived();
  });
});
let url = '';
beforeAll(async () => {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

it('serializes at most maxConcurrency bodies while requests wait for a connection', async () => {
  const publisher = createHttpPublisher({ type: 'http', url, maxConcurrency: 2, timeoutMs: 10_000 });
  let serialized = 0;
  // A payload that counts its serializations (JSON.stringify calls toJSON).
  const payload = (n: number) => ({
    toJSON: () => {
      serialized++;
      return { n, blob: 'x'.repeat(1000) };
    },
  });
  const twoArrived = new Promise<void>((resolve) => {
    arrived = () => {
      if (held.length >= 2) resolve();
    };
  });
  const outcomes = Array.from({ length: 8 }, (_, n) =>
    publisher.publish(
      { id: `m-${n}`, topic: 't', key: null, payload: payload(n) as never, headers: {}, attempt: 0 },
      undefined,
    ),
  );
  await twoArrived;
  // Two requests are at the server and six wait for a connection: only the two were serialized.
  expect(serialized).toBe(2);
  arrived = () => {
    for (const res of held.splice(0)) res.end('ok');
  };
  arrived();
  expect((await Promise.all(outcomes)).map((o) => o.kind)).toEqual(Array(8).fill('sent'));
  expect(serialized).toBe(8);
  await publisher.close();
});
