import { randomBytes } from 'node:crypto';
import { getEventListeners } from 'node:events';
import { Socket } from 'node:net';
import { type JetStreamManager, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import type { OutgoingMessage } from '@queuebox/core';
import { requireServices } from '@queuebox/testing';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { natsServerBinary, startPrivateNatsServer } from '../../../test/brokers/support/nats-server.ts';
import { eventually } from '../../../test/brokers/support/store.ts';
import { createNatsPublisher } from '../src/index.ts';

const needs = await requireServices('nats publisher', ['nats']);
const url = needs.url.nats;
const binary = natsServerBinary();
if ('reason' in binary) console.info(`[nats publisher] outage test skipped: ${binary.reason}`);

const run = randomBytes(4).toString('hex');
const stream = `QB_TEST_PUB_${run}`;
const prefix = `qb.test.pub.${run}`;

let nc: NatsConnection;
const originalWrite = Socket.prototype.write;
let jsm: JetStreamManager;

beforeAll(async () => {
  if (!needs.available) return;
  nc = await connect({ servers: url });
  jsm = await jetstreamManager(nc);
  await jsm.streams.add({ name: stream, subjects: [`${prefix}.js.>`], duplicate_window: 60_000_000_000 });
});

afterAll(async () => {
  if (!needs.available) return;
  await jsm.streams.delete(stream).catch(() => undefined);
  await nc.close();
});

let nextId = 1;
function aMessage(overrides: Partial<OutgoingMessage> = {}): OutgoingMessage {
  const id = `${run}-${nextId++}`;
  return {
    id,
    topic: 'orders.created',
    key: 'o-1',
    payload: { id, note: 'ü' },
    headers: { 'x-trace': 't' },
    attempt: 0,
    ...overrides,
  };
}

async function streamMessages(count: number) {
  const consumer = await jetstream(nc).consumers.get(stream);
  const found = [];
  const messages = await consumer.fetch({ max_messages: count, expires: 2000 });
  for await (const m of messages) found.push(m);
  return found;
}

describe.runIf(needs.available)(`NATS publisher on ${needs.via.nats}`, () => {
  it('publishes to JetStream with the outbox id as message id; a repeat within the window is stored once', async () => {
    // Prepare
    const publisher = createNatsPublisher({ servers: [url], subject: `${prefix}.js.{{ topic }}.{{ key }}` });
    const message = aMessage();
    try {
      // Act
      const first = await publisher.publish(message);
      const repeat = await publisher.publish({ ...message, attempt: 1 });
      // Assess
      expect(first).toEqual({ kind: 'sent' });
      expect(repeat).toEqual({ kind: 'sent' });
      expect((await jsm.streams.info(stream)).state.messages).toBe(1);
      const [stored] = await streamMessages(1);
      expect(stored?.subject).toBe(`${prefix}.js.orders.created.o-1`);
      expect(stored?.json()).toEqual(message.payload);
      expect(stored?.headers?.get('message-id')).toBe(message.id);
      expect(stored?.headers?.get('Nats-Msg-Id')).toBe(message.id);
      expect(stored?.headers?.get('x-trace')).toBe('t');
      expect(stored?.headers?.get('content-type')).toBe('application/json');
    } finally {
      await publisher.close();
    }
  });

  it('publishes on core NATS when jetstream is false', async () => {
    // Prepare
    const subject = `${prefix}.core.orders`;
    const subscription = nc.subscribe(subject, { max: 1 });
    await nc.flush();
    const publisher = createNatsPublisher({ servers: [url], subject, jetstream: false });
    const message = aMessage();
    try {
      // Act
      const outcome = await publisher.publish(message);
      // Assess
      expect(outcome).toEqual({ kind: 'sent' });
      for await (const received of subscription) {
        expect(received.json()).toEqual(message.payload);
        expect(received.headers?.get('message-id')).toBe(message.id);
      }
    } finally {
      await publisher.close();
    }
  });

  it('carries a row whose headers NATS refuses as they are: a value encoded, a name left out, as the HTTP publisher does', async () => {
    // Prepare: names sources store (`base64:…` for a name whose bytes are not UTF-8, a Kafka `Trace Id`) and a value
    // with a line break; the row went dead for any of them (outside audit of encodings: a NATS → NATS bridge)
    const subject = `${prefix}.core.odd-headers`;
    const subscription = nc.subscribe(subject, { max: 1 });
    await nc.flush();
    const publisher = createNatsPublisher({ servers: [url], subject, jetstream: false });
    const message = aMessage({
      headers: { 'base64:ec3p': 'x', 'Trace Id': 'y', 'x-lines': 'a\r\nb', 'x-plain': 'v' },
    });
    try {
      // Act
      const outcome = await publisher.publish(message);
      // Assess
      expect(outcome).toEqual({ kind: 'sent' });
      for await (const received of subscription) {
        const names = [...(received.headers?.keys() ?? [])].map((n) => n.toLowerCase()).sort();
        expect(names).toEqual(['content-type', 'message-id', 'x-lines', 'x-plain']);
        expect(received.headers?.get('x-lines')).toBe('a%0D%0Ab');
        expect(received.headers?.get('x-plain')).toBe('v');
      }
    } finally {
      await publisher.close();
    }
  });

  it('publishes many messages at once on core NATS, sharing flushes, and every one arrives', async () => {
    // Prepare
    const subject = `${prefix}.core.burst`;
    const count = 300;
    const subscription = nc.subscribe(subject, { max: count });
    await nc.flush();
    const publisher = createNatsPublisher({ servers: [url], subject, jetstream: false });
    const messages = Array.from({ length: count }, (_, i) =>
      aMessage({ id: String(5000 + i), payload: { i } }),
    );
    try {
      // Act: the first publish opens the connection; the rest go out in the same turns and share flushes.
      const outcomes = await Promise.all(messages.map((m) => publisher.publish(m)));
      const later = await publisher.publish(aMessage({ id: '9999', payload: { late: true } }));
      // Assess
      expect(outcomes.every((o) => o.kind === 'sent')).toBe(true);
      expect(later).toEqual({ kind: 'sent' });
      const ids = new Set<string>();
      for await (const received of subscription) ids.add(received.headers?.get('message-id') ?? '');
      expect(ids).toEqual(new Set(messages.map((m) => m.id)));
    } finally {
      await publisher.close();
    }
  });

  it('writes the core publishes of a turn and the flush after them in one socket write', async () => {
    // Prepare: a connected publisher, and every socket write of this process seen from here on
    const subject = `${prefix}.core.one-write`;
    const publisher = createNatsPublisher({ servers: [url], subject, jetstream: false });
    expect(await publisher.publish(aMessage())).toEqual({ kind: 'sent' });
    const writes: string[] = [];
    const write = vi.spyOn(Socket.prototype, 'write').mockImplementation(function (
      this: Socket,
      ...args: Parameters<Socket['write']>
    ) {
      const [chunk] = args;
      writes.push(typeof chunk === 'string' ? chunk : Buffer.from(chunk as Uint8Array).toString('latin1'));
      return originalWrite.apply(this, args);
    });
    try {
      // Act
      const outcomes = await Promise.all(Array.from({ length: 10 }, () => publisher.publish(aMessage())));
      // Assess: one write carries all ten messages and ends with the PING whose PONG answers them
      expect(outcomes.every((o) => o.kind === 'sent')).toBe(true);
      const ours = writes.filter((w) => w.includes(`HPUB ${subject} `));
      expect(ours).toHaveLength(1);
      expect(ours[0]?.split(`HPUB ${subject} `)).toHaveLength(11);
      expect(ours[0]?.endsWith('PING\r\n')).toBe(true);
      expect(writes.filter((w) => w === 'PING\r\n')).toHaveLength(0);
    } finally {
      write.mockRestore();
      await publisher.close();
    }
  });

  it('waits for many JetStream acks at once; a message without an ack is a retry on its own', async () => {
    // Prepare: `{{ topic }}` decides: the stream's subjects, none at all, or a core subscriber that never answers
    const silent = nc.subscribe(`${prefix}.silent`);
    await nc.flush();
    const publisher = createNatsPublisher({ servers: [url], subject: '{{ topic }}', timeoutMs: 700 });
    const before = (await jsm.streams.info(stream)).state.messages;
    const topics = Array.from({ length: 60 }, (_, i) =>
      i % 20 === 7 ? `${prefix}.nowhere` : i % 20 === 13 ? `${prefix}.silent` : `${prefix}.js.many.${i}`,
    );
    try {
      // Act
      const outcomes = await Promise.all(topics.map((topic) => publisher.publish(aMessage({ topic }))));
      // Assess
      outcomes.forEach((outcome, i) => {
        const topic = topics[i] as string;
        if (topic.includes('.js.')) expect(outcome).toEqual({ kind: 'sent' });
        else expect(outcome).toMatchObject({ kind: 'retry' });
      });
      const timedOut = outcomes.filter((o, i) => topics[i]?.endsWith('.silent') && o.kind === 'retry');
      expect(timedOut).toHaveLength(3);
      expect(timedOut[0]).toMatchObject({ error: expect.stringMatching(/longer than 700 ms/) });
      expect((await jsm.streams.info(stream)).state.messages - before).toBe(54);
      // The publisher still works after timeouts (the shared timer rearms)
      expect(await publisher.publish(aMessage({ topic: `${prefix}.js.after` }))).toEqual({ kind: 'sent' });
    } finally {
      silent.unsubscribe();
      await publisher.close();
    }
  });

  it('answers every waiting publish with a retry once the drain aborts, through one listener on the shared signal', async () => {
    // Prepare: a core subscriber that never answers, so no ack comes before the (long) timeout
    const silent = nc.subscribe(`${prefix}.unanswered`);
    await nc.flush();
    const publisher = createNatsPublisher({ servers: [url], subject: '{{ topic }}', timeoutMs: 25_000 });
    const deliveries = new AbortController();
    try {
      await publisher.publish(aMessage({ topic: `${prefix}.js.warm` })); // connected before the batch
      const waiting = Array.from({ length: 40 }, () =>
        publisher.publish(aMessage({ topic: `${prefix}.unanswered` }), deliveries.signal),
      );
      await eventually('every publish of the batch reached the subscriber', async () =>
        silent.getReceived() >= 40 ? true : undefined,
      );
      const listeners = getEventListeners(deliveries.signal, 'abort').length;
      // Act
      deliveries.abort(new Error('drain deadline'));
      const outcomes = await Promise.all(waiting);
      // Assess: answered by the abort, not by the 25 s ack timeout
      expect(listeners).toBe(1);
      for (const outcome of outcomes) {
        expect(outcome).toMatchObject({
          kind: 'retry',
          error: expect.stringMatching(/aborted while waiting/),
        });
      }
      expect(await publisher.publish(aMessage({ topic: `${prefix}.js.after-abort` }))).toEqual({
        kind: 'sent',
      });
    } finally {
      silent.unsubscribe();
      await publisher.close();
    }
  });

  it.each([true, false])(
    'dead-letters at once what NATS can never take (jetstream: %s): illegal or wildcard subject, over max_payload',
    async (useJetStream) => {
      // Prepare: the subject comes from the row's key; the stream takes every subject under the prefix
      const publisher = createNatsPublisher({
        servers: [url],
        subject: `${prefix}.js.{{ key }}`,
        jetstream: useJetStream,
        timeoutMs: 2000,
      });
      try {
        // Act: all at once, with good ones beside them
        const [space, star, tail, empty, big, ...good] = await Promise.all([
          publisher.publish(aMessage({ key: 'a b' })),
          publisher.publish(aMessage({ key: '*' })),
          publisher.publish(aMessage({ key: 'x.>' })),
          publisher.publish(aMessage({ key: 'x..y' })),
          publisher.publish(aMessage({ key: 'big', payload: { blob: 'x'.repeat(2 * 1024 * 1024) } })),
          publisher.publish(aMessage({ key: `fine-${useJetStream}` })),
          publisher.publish(aMessage({ key: `fine-${useJetStream}.*x` })),
        ]);
        // Assess
        expect(space).toMatchObject({ kind: 'dead', error: expect.stringMatching(/spaces/) });
        expect(star).toMatchObject({ kind: 'dead', error: expect.stringMatching(/wildcard/) });
        expect(tail).toMatchObject({ kind: 'dead', error: expect.stringMatching(/wildcard/) });
        expect(empty).toMatchObject({ kind: 'dead', error: expect.stringMatching(/empty token/) });
        expect(big).toMatchObject({
          kind: 'dead',
          error: expect.stringMatching(/max_payload size exceeded .*max_payload is \d+ bytes/),
        });
        expect(good).toEqual([{ kind: 'sent' }, { kind: 'sent' }]);
      } finally {
        await publisher.close();
      }
    },
  );

  it('retries when no stream takes the subject, and when no server listens', async () => {
    // Prepare
    const noStream = createNatsPublisher({ servers: [url], subject: `${prefix}.nowhere`, timeoutMs: 1000 });
    const noServer = createNatsPublisher({ servers: ['nats://127.0.0.1:1'], connectTimeoutMs: 500 });
    try {
      // Act
      const [a, b] = [await noStream.publish(aMessage()), await noServer.publish(aMessage())];
      // Assess
      expect(a).toMatchObject({ kind: 'retry' });
      expect(b).toMatchObject({ kind: 'retry', error: expect.stringMatching(/Cannot connect to NATS/) });
    } finally {
      await noStream.close();
      await noServer.close();
    }
  });

  it.runIf('path' in binary)(
    'retries while its server is down and delivers on the same connection once it is back',
    async () => {
      // Prepare: a private server with a stream, so the machine's server is never stopped
      const server = await startPrivateNatsServer('path' in binary ? binary.path : '');
      const admin = await connect({ servers: server.url });
      await (await jetstreamManager(admin)).streams.add({ name: 'OUTAGE', subjects: ['outage.>'] });
      await admin.close();
      const publisher = createNatsPublisher({
        servers: [server.url],
        subject: 'outage.{{ topic }}',
        timeoutMs: 500,
        reconnectTimeWaitMs: 100,
      });
      try {
        const before = await publisher.publish(aMessage());
        // Act
        await server.stop();
        const during = await publisher.publish(aMessage());
        await server.start();
        // The client reconnects by itself; until then every attempt is a fast retry.
        const after = await eventually('a publish after the restart', async () => {
          const outcome = await publisher.publish(aMessage({ payload: { after: true } }));
          return outcome.kind === 'sent' ? outcome : undefined;
        });
        // Assess
        expect(before).toEqual({ kind: 'sent' });
        expect(during).toMatchObject({ kind: 'retry' });
        expect(after).toEqual({ kind: 'sent' });
        const check = await connect({ servers: server.url });
        const stored = (await (await jetstreamManager(check)).streams.info('OUTAGE')).state.messages;
        await check.close();
        expect(stored).toBeGreaterThanOrEqual(2);
      } finally {
        await publisher.close();
        await server.dispose();
      }
    },
  );
  it.runIf('path' in binary)(
    'subscribes for its JetStream acks again once the server refused the subscription, so a permission granted later is taken up',
    async () => {
      // Prepare: a private server whose default user may publish but not subscribe to _INBOX.> (then a reload
      // grants it), and an admin that sets up the stream
      const users = (permissions: string) => `
        no_auth_user: qb
        authorization { users = [
          { user: qb, password: qb${permissions} }
          { user: adm, password: adm }
        ] }`;
      const denied = users(', permissions: { publish: ">", subscribe: { deny: "_INBOX.>" } }');
      const server = await startPrivateNatsServer('path' in binary ? binary.path : '', { config: denied });
      const admin = await connect({ servers: server.url, user: 'adm', pass: 'adm' });
      const adminJsm = await jetstreamManager(admin);
      await adminJsm.streams.add({ name: 'PRIV', subjects: ['priv.>'] });
      const publisher = createNatsPublisher({
        servers: [server.url],
        subject: 'priv.{{ topic }}',
        timeoutMs: 1000,
      });
      try {
        const refused = await publisher.publish(aMessage());
        // Act: the permission is granted without a restart of the server or of the publisher
        await server.reload(users(''));
        const after = [await publisher.publish(aMessage()), await publisher.publish(aMessage())];
        // Assess: before the fix the ack subscription stayed closed and every later publish timed out
        expect(refused).toMatchObject({
          kind: 'retry',
          error: expect.stringMatching(/Permissions Violation/),
        });
        expect(after).toEqual([{ kind: 'sent' }, { kind: 'sent' }]);
        expect((await adminJsm.streams.info('PRIV')).state.messages).toBe(3);
      } finally {
        await publisher.close();
        await admin.close();
        await server.dispose();
      }
    },
  );

  it.runIf('path' in binary)(
    'connects with the user and password or the token of its server URL, and never repeats them in an error',
    async () => {
      // Prepare: one server requiring a user, one a token; the secrets hold characters a URL must encode
      const password = 'p@ss:w/rd';
      const token = 't0ken#1';
      const withUser = await startPrivateNatsServer('path' in binary ? binary.path : '', {
        config: `authorization { users = [ { user: "qb", password: "${password}" } ] }`,
      });
      const withToken = await startPrivateNatsServer('path' in binary ? binary.path : '', {
        config: `authorization { token: "${token}" }`,
      });
      const host = (server: { url: string }) => server.url.slice('nats://'.length);
      for (const [server, credentials] of [
        [withUser, { user: 'qb', pass: password }],
        [withToken, { token }],
      ] as const) {
        const admin = await connect({ servers: server.url, ...credentials });
        await (await jetstreamManager(admin)).streams.add({ name: 'AUTH', subjects: ['auth.>'] });
        await admin.close();
      }
      const encode = (text: string) => text.split(':').map(encodeURIComponent).join(':');
      const publishers = [
        createNatsPublisher({
          servers: [`nats://${encode(`qb:${password}`)}@${host(withUser)}`],
          subject: 'auth.{{ topic }}',
          timeoutMs: 2000,
        }),
        createNatsPublisher({
          servers: [`nats://${encodeURIComponent(token)}@${host(withToken)}`],
          subject: 'auth.{{ topic }}',
          timeoutMs: 2000,
        }),
        createNatsPublisher({
          servers: [`nats://qb:${encodeURIComponent('wr0ng-secret')}@${host(withUser)}`],
          subject: 'auth.{{ topic }}',
          connectTimeoutMs: 2000,
        }),
      ];
      try {
        // Act
        const [user, byToken, wrong] = await Promise.all(publishers.map((p) => p.publish(aMessage())));
        // Assess: before the fix the credentials were dropped and the server refused both
        expect(user).toEqual({ kind: 'sent' });
        expect(byToken).toEqual({ kind: 'sent' });
        expect(wrong).toMatchObject({
          kind: 'retry',
          error: expect.stringMatching(/Authorization Violation/),
        });
        expect(JSON.stringify(wrong)).not.toMatch(/wr0ng/);
      } finally {
        await Promise.all(publishers.map((p) => p.close()));
        await withUser.dispose();
        await withToken.dispose();
      }
    },
  );

  it('dead-letters what JetStream refuses for good (max_msg_size, a sealed stream, a failed Nats-Expected-* check); a full stream is retried', async () => {
    // Prepare: streams of their own, each refusing for one reason
    const limits = `QB_TEST_PUB_LIM_${run}`;
    const sealed = `QB_TEST_PUB_SEAL_${run}`;
    await jsm.streams.add({ name: limits, subjects: [`${prefix}.lim.>`], max_msg_size: 64 });
    await jsm.streams.add({
      name: `${limits}_FULL`,
      subjects: [`${prefix}.full.>`],
      max_msgs: 1,
      discard: 'new' as never,
    });
    await jsm.streams.add({ name: sealed, subjects: [`${prefix}.seal.>`] });
    const info = await jsm.streams.info(sealed);
    // nats.js's update type leaves `sealed` out; the server takes it (a sealed stream is never unsealed).
    await jsm.streams.update(sealed, { ...info.config, sealed: true } as never);
    const publisher = createNatsPublisher({
      servers: [url],
      subject: `${prefix}.{{ topic }}`,
      timeoutMs: 5000,
    });
    try {
      // Act
      const tooLarge = await publisher.publish(
        aMessage({ topic: 'lim.a', payload: { blob: 'x'.repeat(200) } }),
      );
      const toSealed = await publisher.publish(aMessage({ topic: 'seal.a' }));
      const otherStream = await publisher.publish(
        aMessage({ topic: 'js.expect', headers: { 'Nats-Expected-Stream': 'ANOTHER' } }),
      );
      const wrongSequence = await publisher.publish(
        aMessage({ topic: 'js.expect', headers: { 'Nats-Expected-Last-Sequence': '999999' } }),
      );
      const fits = await publisher.publish(aMessage({ topic: 'full.a', payload: {} }));
      const full = await publisher.publish(aMessage({ topic: 'full.a', payload: {} }));
      // Assess: before the fix each was a retry until the row had no attempt left
      expect(tooLarge).toMatchObject({ kind: 'dead', error: expect.stringMatching(/10054/) });
      expect(toSealed).toMatchObject({ kind: 'dead', error: expect.stringMatching(/10109/) });
      expect(otherStream).toMatchObject({ kind: 'dead', error: expect.stringMatching(/10060/) });
      expect(wrongSequence).toMatchObject({ kind: 'dead', error: expect.stringMatching(/10071/) });
      expect(fits).toEqual({ kind: 'sent' });
      expect(full).toMatchObject({ kind: 'retry', error: expect.stringMatching(/10077/) });
    } finally {
      await publisher.close();
      for (const name of [limits, `${limits}_FULL`, sealed])
        await jsm.streams.delete(name).catch(() => undefined);
    }
  });
});
