/**
 * Two QueueBox installs (other schemas or databases) whose NATS sources have the same name default to one durable
 * consumer, `queuebox-{source}`, and would split its messages, each inbox storing only part of them. On a NATS
 * server 2.10 or later the durable records the install id in its metadata: a second install is refused, replicas
 * of one install share it, and a durable that names no install (an older QueueBox's, or made by hand) is adopted.
 * On an older server nothing is recorded (a DEBUG line).
 *
 * The metadata tests need a 2.10+ server: the test NATS when it is one, else a private server of the nats-server
 * binary (`QUEUEBOX_TEST_NATS_SERVER`, else the PATH) when that one is 2.10+; otherwise they are skipped, saying
 * so. The older-server test runs when the test NATS is older than 2.10.
 */

import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  AckPolicy,
  DeliverPolicy,
  type JetStreamManager,
  jetstream,
  jetstreamManager,
} from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import type { BrokerIngestionPort, Logger } from '@queuebox/core';
import { countingIngestion, recordingLogger, requireServices } from '@queuebox/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  newerNatsServerBinary,
  type PrivateNatsServer,
  startPrivateNatsServer,
} from '../../../test/brokers/support/nats-server.ts';
import {
  createNatsSource,
  NATS_INSTALL_ID_METADATA_KEY,
  NatsConsumerRefusedError,
  NatsDurableInUseError,
  natsServerKeepsMetadata,
} from '../src/index.ts';

const needs = await requireServices('nats shared durable', ['nats']);
const run = randomBytes(4).toString('hex');
const installA = randomBytes(16).toString('hex');
const installB = randomBytes(16).toString('hex');

/** The version the test NATS says in its INFO. */
async function versionOf(url: string): Promise<string | undefined> {
  const nc = await connect({ servers: url });
  try {
    return nc.info?.version;
  } finally {
    await nc.close();
  }
}

const sharedVersion = needs.available ? await versionOf(needs.url.nats) : undefined;
const binary = newerNatsServerBinary();
const binaryVersion =
  'path' in binary
    ? /v?(\d+\.\d+\.\d+)/.exec(spawnSync(binary.path, ['--version']).stdout?.toString() ?? '')?.[1]
    : undefined;
/** Where the metadata tests run: the test NATS if it keeps metadata, else a private server of a 2.10+ binary. */
const metadataTarget: { readonly via: 'shared' | 'private' } | { readonly skip: string } = !needs.available
  ? { skip: needs.skipReason ?? 'no NATS' }
  : natsServerKeepsMetadata(sharedVersion)
    ? { via: 'shared' }
    : natsServerKeepsMetadata(binaryVersion)
      ? { via: 'private' }
      : {
          skip: `the test NATS is ${sharedVersion} and the nats-server binary ${binaryVersion ?? '(none)'}: consumer metadata needs 2.10+ (bash scripts/nats-server-2.10.sh fetches one, as scripts/services.sh does; or set QUEUEBOX_TEST_NATS_SERVER to a 2.10+ binary)`,
        };
if ('skip' in metadataTarget) {
  console.log(`[nats shared durable] metadata tests skipped: ${metadataTarget.skip}`);
}

let server: PrivateNatsServer | undefined;
let url = '';
let nc: NatsConnection;
let jsm: JetStreamManager;
const streams: string[] = [];

beforeAll(async () => {
  if ('skip' in metadataTarget) return;
  if (metadataTarget.via === 'private' && 'path' in binary)
    server = await startPrivateNatsServer(binary.path);
  url = server?.url ?? needs.url.nats;
  nc = await connect({ servers: url });
  jsm = await jetstreamManager(nc);
});

afterAll(async () => {
  for (const stream of streams) await jsm?.streams.delete(stream).catch(() => undefined);
  await nc?.close();
  await server?.dispose();
});

function sourceOf(
  serverUrl: string,
  stream: string,
  installId: string,
  extra: { ingestion?: BrokerIngestionPort; logger?: Logger; createMissing?: boolean } = {},
) {
  return createNatsSource({
    source: 'orders',
    servers: [serverUrl],
    stream,
    subject: `${stream.toLowerCase()}.>`,
    ingestion: extra.ingestion ?? countingIngestion(),
    fetchExpiresMs: 1000,
    installId: async () => installId,
    ...(extra.logger ? { logger: extra.logger } : {}),
    ...(extra.createMissing === undefined ? {} : { createMissing: extra.createMissing }),
  });
}

const newStream = (label: string) => {
  const stream = `SHARED_${label}_${run}`.toUpperCase();
  streams.push(stream);
  return stream;
};

describe.skipIf('skip' in metadataTarget)('NATS durable shared by installs (server 2.10+)', () => {
  it('a durable the source creates names its install; a replica of the same install shares it', async () => {
    // Prepare
    const stream = newStream('same');
    const one = countingIngestion();
    const two = countingIngestion();
    const logOne = recordingLogger();
    const logTwo = recordingLogger();
    const replicaOne = sourceOf(url, stream, installA, { ingestion: one, logger: logOne });
    const replicaTwo = sourceOf(url, stream, installA, { ingestion: two, logger: logTwo });
    try {
      // Act
      const first = await replicaOne.pull({ deadline: Date.now() + 5000 });
      const js = jetstream(nc);
      for (let i = 0; i < 20; i++) await js.publish(`${stream.toLowerCase()}.x`, `{"i":${i}}`);
      const second = await replicaTwo.pull({ deadline: Date.now() + 5000 });
      const again = await replicaOne.pull({ deadline: Date.now() + 5000 });
      // Assess: the durable names install A; both replicas pulled without a failure and together took all 20
      expect(first.stoppedFor).toBe('empty');
      expect(second.stoppedFor).not.toBe('error');
      expect(again.stoppedFor).not.toBe('error');
      expect(one.count() + two.count()).toBe(20);
      const info = await jsm.consumers.info(stream, 'queuebox-orders');
      expect(info.config.metadata?.[NATS_INSTALL_ID_METADATA_KEY]).toBe(installA);
      expect([...logOne.lines, ...logTwo.lines].filter((l) => l.level !== 'debug')).toEqual([]);
    } finally {
      await replicaOne.close();
      await replicaTwo.close();
    }
  });

  it('a second install is refused: every pull fails at set-up, naming the durable, the other install and the fix', async () => {
    // Prepare: install A's source created the durable; 3 messages wait in it
    const stream = newStream('other');
    const a = sourceOf(url, stream, installA);
    const aIngestion = countingIngestion();
    const b = sourceOf(url, stream, installB);
    const bBound = sourceOf(url, stream, installB, { createMissing: false });
    try {
      await a.pull({ deadline: Date.now() + 5000 });
      const js = jetstream(nc);
      for (let i = 0; i < 3; i++) await js.publish(`${stream.toLowerCase()}.x`, `{"i":${i}}`);
      // Act
      const refused = await b.pull({ deadline: Date.now() + 5000 });
      const refusedAgain = await b.pull({ deadline: Date.now() + 5000 });
      const refusedBound = await bBound.pull({ deadline: Date.now() + 5000 });
      // Assess: B fetched nothing; its error names the durable, A's install id and the fix
      for (const report of [refused, refusedAgain, refusedBound]) {
        expect(report.stoppedFor).toBe('error');
        expect(report.fetched).toBe(0);
        expect(report.error).toBeInstanceOf(NatsDurableInUseError);
        expect(report.error).toBeInstanceOf(NatsConsumerRefusedError);
      }
      const error = refused.error as NatsDurableInUseError;
      expect(error.otherInstallId).toBe(installA);
      expect(error.durable).toBe('queuebox-orders');
      expect(error.message).toContain('queuebox-orders');
      expect(error.message).toContain(installA);
      expect(error.message).toContain('sources.orders.durable');
      // The durable still names A, and A gets every message
      const info = await jsm.consumers.info(stream, 'queuebox-orders');
      expect(info.config.metadata?.[NATS_INSTALL_ID_METADATA_KEY]).toBe(installA);
      const aAgain = sourceOf(url, stream, installA, { ingestion: aIngestion });
      try {
        await aAgain.pull({ deadline: Date.now() + 5000 });
      } finally {
        await aAgain.close();
      }
      expect(aIngestion.count()).toBe(3);
    } finally {
      await a.close();
      await b.close();
      await bBound.close();
    }
  });

  it('a durable that names no install (an older QueueBox, or made by hand) is adopted, with an INFO line', async () => {
    // Prepare: a durable made by hand with metadata of its own and no install key
    const stream = newStream('adopt');
    await jsm.streams.add({ name: stream, subjects: [`${stream.toLowerCase()}.>`] });
    await jsm.consumers.add(stream, {
      durable_name: 'queuebox-orders',
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
      filter_subject: `${stream.toLowerCase()}.>`,
      metadata: { team: 'payments' },
    });
    const logger = recordingLogger();
    const a = sourceOf(url, stream, installA, { logger });
    const b = sourceOf(url, stream, installB);
    try {
      // Act
      const adopted = await a.pull({ deadline: Date.now() + 5000 });
      const refused = await b.pull({ deadline: Date.now() + 5000 });
      // Assess: the key was added (the durable's own metadata kept), said at INFO; then install B is refused
      expect(adopted.stoppedFor).toBe('empty');
      const info = await jsm.consumers.info(stream, 'queuebox-orders');
      expect(info.config.metadata).toMatchObject({
        team: 'payments',
        [NATS_INSTALL_ID_METADATA_KEY]: installA,
      });
      expect(logger.lines.filter((l) => l.level === 'info')).toEqual([
        expect.objectContaining({ message: expect.stringMatching(/adopted/) }),
      ]);
      expect(refused.error).toBeInstanceOf(NatsDurableInUseError);
    } finally {
      await a.close();
      await b.close();
    }
  });
});

describe.skipIf(!needs.available || natsServerKeepsMetadata(sharedVersion))(
  `NATS durable on a server without consumer metadata (${sharedVersion})`,
  () => {
    const olderUrl = needs.available ? needs.url.nats : '';
    let older: NatsConnection;
    beforeAll(async () => {
      older = await connect({ servers: olderUrl });
    });
    afterAll(async () => {
      await older?.close();
    });

    it('creates and shares the durable as before, with a DEBUG line and no metadata', async () => {
      // Prepare
      const stream = `SHARED_OLD_${run}`.toUpperCase();
      const manager = await jetstreamManager(older);
      const logger = recordingLogger();
      const a = sourceOf(olderUrl, stream, installA, { logger });
      const b = sourceOf(olderUrl, stream, installB);
      try {
        // Act
        const first = await a.pull({ deadline: Date.now() + 5000 });
        const second = await a.pull({ deadline: Date.now() + 5000 });
        const other = await b.pull({ deadline: Date.now() + 5000 });
        // Assess: no failure (nothing can be recorded, so nothing is refused); one DEBUG line names the version
        expect([first.stoppedFor, second.stoppedFor, other.stoppedFor]).toEqual(['empty', 'empty', 'empty']);
        expect(logger.lines).toEqual([
          expect.objectContaining({
            level: 'debug',
            fields: expect.objectContaining({ serverVersion: sharedVersion, consumer: 'queuebox-orders' }),
          }),
        ]);
        const info = await manager.consumers.info(stream, 'queuebox-orders');
        expect(info.config.metadata).toBeUndefined();
      } finally {
        await a.close();
        await b.close();
        await manager.streams.delete(stream).catch(() => undefined);
      }
    });
  },
);
