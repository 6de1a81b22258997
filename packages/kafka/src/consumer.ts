import type { BrokerIngestionPort, BrokerIngestResult, BrokerMessage, Logger } from '@queuebox/core';
import { QueueBoxError, silentLogger } from '@queuebox/core';
import type { Admin, Consumer, Kafka } from 'kafkajs';
import { createKafkaClient, describeKafkaError, type KafkaClientOptions } from './client.ts';
import { KafkaBatchDecompressionError } from './compression.ts';
import { consumedRecordMessage } from './records.ts';

/** `sources.<name>` of `type: kafka`, the fields the consumer reads (the validated configuration fits). */

/**
 * The consumer-group session of a local member, in ms: how long the group coordinator keeps a member it hears nothing
 * from. A member that crashed (kill -9) holds its partitions that long, so a restarted runtime consumed nothing for it
 * (kafkajs's default, 30 s: an outside crash soak saw ~30 s after one kill). 10 s, the Java client's default before
 * 3.0; the member heartbeats at least every 3 s between records (`heartbeatInterval`).
 */
export const CONSUMER_SESSION_TIMEOUT_MS = 10_000;

/**
 * The request timeout of a consumer's connections, in ms: above the session, because the coordinator may hold a
 * SyncGroup until a dead member's session runs out. Under a shorter timeout each SyncGroup timed out, the member
 * joined again, and a crash loop's restarted runtime consumed nothing for 50 s to 2 min 19 s (the soak: `Request
 * SyncGroup … timed out` six times).
 */
export const CONSUMER_REQUEST_TIMEOUT_MS = 30_000;

/** Longest wait of a consumer's `close` for kafkajs to leave the group, in ms. */
export const CONSUMER_CLOSE_WAIT_MS = 5_000;

export interface KafkaSourceOptions {
  readonly brokers: readonly string[];
  readonly topics: readonly string[];
  /** Consumer group. Default `queuebox-{source}`. */
  readonly groupId?: string;
}

/** Options of the long-lived consumer group member. */
export interface KafkaConsumerOptions extends KafkaSourceOptions, Omit<KafkaClientOptions, 'brokers'> {
  /** The source's name: what `ingest` is called with. */
  readonly source: string;
  readonly ingestion: BrokerIngestionPort;
  /**
   * Where a group without committed offsets starts: the earliest record (true) or only new ones (false).
   * Default true: records written before QueueBox first ran are not skipped.
   */
  readonly fromBeginning?: boolean;
  /**
   * How long one fetch waits on the broker for new records. It bounds how long `close()` waits for the fetch in
   * flight. Default 1000 ms (kafkajs's own default is 5000).
   */
  readonly maxWaitTimeMs?: number;
  /**
   * How long the partition of a record whose ingestion failed (database down, or a bug) is paused before the record is
   * tried again; the member's other partitions go on meanwhile. Default 1000 ms.
   */
  readonly retryDelayMs?: number;
  /**
   * Within a batch (up to thousands of records), the offset of the stored records is committed once this long has
   * passed since the last commit, or once `commitEveryRecords` records were stored since; and at the end of the
   * batch. A restart after a crash stores again at most about this much. Default 1000 ms.
   */
  readonly commitIntervalMs?: number;
  /** See `commitIntervalMs`. Default 500 records. */
  readonly commitEveryRecords?: number;
  readonly onIngested?: (result: BrokerIngestResult, message: BrokerMessage) => void;
  readonly onError?: (error: unknown, context: { readonly during: 'ingest' | 'commit' | 'consume' }) => void;
  /**
   * The install id of the store the consumer writes to (`store.installId()`). With it the member's client id is
   * `queuebox-<installId>-<source>` (see {@link kafkaMemberClientId}), so the group's members say which install
   * they belong to; `start` refuses a group that already has a member of another install
   * ({@link KafkaGroupInUseError}), and after each join of the group the members are read again and a member of
   * another install is logged as an ERROR (`logger`). Replicas of one install share the id and the group. Without
   * it the client id is `clientId` (default `queuebox`) and nothing is checked.
   */
  readonly installId?: string;
  /** Where the group checks of `installId` are logged (ERROR / WARN). Default silent. */
  readonly logger?: Logger;
}

/**
 * `start` refused the group: a member of another QueueBox install (another schema or database) is in it. Two
 * installs in one group split the topic's records, each inbox storing only part of them.
 */
export class KafkaGroupInUseError extends QueueBoxError {
  readonly groupId: string;
  /** The install ids of the other installs' members. */
  readonly otherInstallIds: readonly string[];
  constructor(details: {
    readonly source: string;
    readonly groupId: string;
    readonly installId: string;
    readonly otherInstallIds: readonly string[];
    readonly members: readonly string[];
  }) {
    super(
      `Kafka consumer group ${details.groupId} has members of another QueueBox install (${details.otherInstallIds.join(', ')}; this one is ${details.installId}; members ${details.members.join(', ')}): joining would split the topic's records between the two inboxes. Source ${details.source} is not started; configure a group of its own (sources.${details.source}.groupId, e.g. ${details.groupId}-${details.installId.slice(0, 8)})`,
    );
    this.groupId = details.groupId;
    this.otherInstallIds = details.otherInstallIds;
  }
}

/** The client id of a consumer-group member of the install `installId`: `queuebox-<installId>-<source>`. */
export function kafkaMemberClientId(installId: string, source: string): string {
  return `queuebox-${installId}-${source}`;
}

/** The install id a member's client id names (see {@link kafkaMemberClientId}), or undefined. */
export function installIdOfKafkaClientId(clientId: string): string | undefined {
  return /^queuebox-([0-9a-f]{32})(?:-|$)/.exec(clientId)?.[1];
}

/** The members of `groupId` with the install each names (undefined: none), read with a short-lived admin client. */
async function groupMembers(
  kafka: Kafka,
  groupId: string,
): Promise<{ readonly clientId: string; readonly clientHost: string; readonly installId?: string }[]> {
  const admin: Admin = kafka.admin();
  try {
    await admin.connect();
    const { groups } = await admin.describeGroups([groupId]);
    return (groups[0]?.members ?? []).map((m) => {
      const installId = installIdOfKafkaClientId(m.clientId);
      return { clientId: m.clientId, clientHost: m.clientHost, ...(installId ? { installId } : {}) };
    });
  } finally {
    await admin.disconnect().catch(() => undefined);
  }
}

/** Names of the errors kafkajs (or a codec) throws while decoding a fetch response's record batches. */
const DECODE_ERROR_NAMES: ReadonlySet<string> = new Set([
  'KafkaBatchDecompressionError',
  'KafkaJSNotImplemented',
  'KafkaJSInvalidVarIntError',
  'KafkaJSInvalidLongError',
  'KafkaJSUnsupportedMagicByteInMessageSet',
  // Buffer reads past the end of a corrupt batch.
  'RangeError',
]);

/** Whether a consumer crash comes from a fetch response kafkajs could not decode (somewhere in the cause chain). */
export function isKafkaFetchDecodeError(error: unknown): boolean {
  let current: unknown = error;
  for (let depth = 0; current instanceof Error && depth < 4; depth++) {
    if (current instanceof KafkaBatchDecompressionError || DECODE_ERROR_NAMES.has(current.name)) return true;
    current =
      (current as { cause?: unknown }).cause ?? (current as { originalError?: unknown }).originalError;
  }
  return false;
}

/**
 * kafkajs error types of a heartbeat (or commit) that mean the member must rejoin the group before it may go on: the
 * group is rebalancing (another member joined or left), the member's generation is over, the coordinator moved, or
 * the coordinator no longer knows the member (evicted after the session or rebalance timeout). kafkajs's runner
 * rejoins on these when the batch handler throws them.
 */
const REJOIN_ERROR_TYPES: ReadonlySet<string> = new Set([
  'REBALANCE_IN_PROGRESS',
  'ILLEGAL_GENERATION',
  'NOT_COORDINATOR_FOR_GROUP',
  'UNKNOWN_MEMBER_ID',
]);
/** Of these, the ones after which the coordinator refuses the member's commits. */
const FENCED_ERROR_TYPES: ReadonlySet<string> = new Set(['ILLEGAL_GENERATION', 'UNKNOWN_MEMBER_ID']);

/** The kafkajs error (in the cause chain) that says the member must rejoin the group, if any. */
export function kafkaRejoinError(error: unknown): (Error & { readonly type: string }) | undefined {
  let current: unknown = error;
  for (let depth = 0; current instanceof Error && depth < 4; depth++) {
    const type = (current as { type?: unknown }).type;
    if (typeof type === 'string' && REJOIN_ERROR_TYPES.has(type)) return current as Error & { type: string };
    current =
      (current as { cause?: unknown }).cause ?? (current as { originalError?: unknown }).originalError;
  }
  return undefined;
}

/** Where the group stands on one assigned partition when a fetch could not be decoded. */
export interface KafkaPartitionPosition {
  readonly topic: string;
  readonly partition: number;
  /** The group's committed offset (the next record to store), `-1` when none; undefined when it could not be read. */
  readonly committedOffset?: string;
}

/**
 * A fetch whose record batches kafkajs could not decode (a codec it cannot read, a corrupt or truncated batch).
 * kafkajs decodes a whole fetch response before any record reaches the consumer, so none of the fetch's records
 * (not even those before the bad batch) are stored and the member rejoins and fetches again; the partition holding
 * the batch stays at its committed offset until the batch can be read. The message names the assigned partitions
 * and their committed offsets (the bad batch is at or after one of them), since kafkajs does not say which
 * partition's batch failed.
 */
export class KafkaFetchDecodeError extends Error {
  override readonly name = 'KafkaFetchDecodeError';
  /** The assigned partitions and their committed offsets when the fetch failed. */
  readonly positions: readonly KafkaPartitionPosition[];
  constructor(positions: readonly KafkaPartitionPosition[], cause: unknown) {
    const where =
      positions.length === 0
        ? 'no partition known to be assigned'
        : positions
            .map((p) => `${p.topic}/${p.partition} at committed offset ${p.committedOffset ?? 'unknown'}`)
            .join(', ');
    super(
      `a Kafka fetch could not be decoded, so no record of it is stored and the partition holding the bad batch ` +
        `does not advance (${where}): ${describeKafkaError(cause)}`,
      { cause },
    );
    this.positions = positions;
  }
}

/** A running consumer. */
export interface KafkaConsumer {
  /**
   * Joins the group and starts consuming; resolves once the consumer runs (it keeps rejoining by itself). With
   * `installId` it first reads the group's members and rejects with {@link KafkaGroupInUseError} when one belongs to
   * another install.
   */
  start(): Promise<void>;
  /** Stops after the record in hand, commits what was stored, leaves the group. */
  close(): Promise<void>;
}

/**
 * The long-lived Kafka consumer of a source for the local runtime: a kafkajs consumer-group member (kafkajs
 * rejoins and reconnects by itself). Records of a partition are stored one after another; an offset is committed
 * only after its inbox row (pending or dead) committed — every `commitIntervalMs` / `commitEveryRecords` within a
 * batch, after each batch (past the batch's last offset once all its records are stored, so transaction markers
 * and aborted records are committed too and the lag reaches zero), and before leaving. A record whose ingestion
 * fails is never skipped: its partition is paused for `retryDelayMs` and fetched again from that record, while the
 * member's other partitions go on, so a database outage holds each partition until the database is back and one
 * poison record holds only its own; when the member stops or loses the partition meanwhile, nothing past the stored
 * records is committed and the next owner starts at the failed record. A record that fails for another reason (a
 * transform function that throws on it) is stored as a dead row by the ingestion itself once it has failed its
 * source's `deadAfterFailures` times over `deadAfterMs`, and the partition goes on.
 *
 * A heartbeat (sent at most every heartbeat interval, 3 s, between records) that says the
 * group is rebalancing or the member was evicted ends the batch at once: the stored records are committed (when
 * the coordinator still takes the member's commits) and kafkajs rejoins, so another member joining waits about a
 * heartbeat interval rather than for a batch of thousands of records, and no record is stored after the member
 * lost its partitions (the rest of the fetch is dropped too).
 */
export function createKafkaConsumer(options: KafkaConsumerOptions): KafkaConsumer {
  const retryDelayMs = options.retryDelayMs ?? 1000;
  const commitIntervalMs = options.commitIntervalMs ?? 1000;
  const commitEveryRecords = options.commitEveryRecords ?? 500;
  const installId = options.installId;
  const logger = options.logger ?? silentLogger;
  const kafka = createKafkaClient({
    ...options,
    ...(installId === undefined ? {} : { clientId: kafkaMemberClientId(installId, options.source) }),
    requestTimeoutMs: options.requestTimeoutMs ?? CONSUMER_REQUEST_TIMEOUT_MS,
  });
  const groupId = options.groupId ?? `queuebox-${options.source}`;
  const consumer: Consumer = kafka.consumer({
    sessionTimeout: CONSUMER_SESSION_TIMEOUT_MS,
    groupId,
    maxWaitTimeInMs: options.maxWaitTimeMs ?? 1000,
  });
  let stopping = false;
  const wakers = new Set<() => void>();
  /** The partitions of the latest group join, for the context of a fetch that could not be decoded. */
  let assigned: Readonly<Record<string, readonly number[]>> = {};
  /**
   * Set when a heartbeat or commit said the member must rejoin: kafkajs still hands over the other batches of the
   * fetch in hand (one per partition), which must not be stored either. Cleared when the member joined again.
   */
  let mustRejoin: (Error & { readonly type: string }) | undefined;
  consumer.on(consumer.events.GROUP_JOIN, (event) => {
    assigned = event.payload.memberAssignment;
    mustRejoin = undefined;
    logger.debug('joined the Kafka consumer group', { source: options.source, groupId, assigned });
    // Once per join (a rebalance), in the background: the records go on meanwhile.
    if (installId !== undefined && !stopping) void checkGroupAfterJoin(installId);
  });

  const installFields = (members: Awaited<ReturnType<typeof groupMembers>>, id: string) => {
    const others = [
      ...new Set(members.flatMap((m) => (m.installId && m.installId !== id ? [m.installId] : []))),
    ];
    const unnamed = members.filter((m) => m.installId === undefined);
    return { others, unnamed };
  };

  /**
   * After a join: a member of another install is an ERROR (the records are being split); a member naming no
   * install (an older QueueBox, another program, an MSK trigger) a WARN. The member keeps consuming: stopping would
   * hand every partition to the other install, no better (see the README).
   */
  async function checkGroupAfterJoin(id: string): Promise<void> {
    let members: Awaited<ReturnType<typeof groupMembers>>;
    try {
      members = await groupMembers(kafka, groupId);
    } catch (error) {
      if (!stopping) {
        logger.warn('could not read the Kafka consumer group members after a join; not checked this time', {
          source: options.source,
          groupId,
          error: describeKafkaError(error),
        });
      }
      return;
    }
    if (stopping) return;
    const { others, unnamed } = installFields(members, id);
    const list = members.map((m) => `${m.clientId}@${m.clientHost}`);
    if (others.length > 0) {
      logger.error(
        'Kafka consumer group has members of another QueueBox install: the topic records are split between the two inboxes, each storing only part of them; give one of the sources a groupId of its own',
        { source: options.source, groupId, installId: id, otherInstallIds: others, members: list },
      );
    } else if (unnamed.length > 0) {
      logger.warn(
        'Kafka consumer group has members that name no QueueBox install (an older QueueBox, another program or an MSK trigger): if they are not this install, the records are split between them',
        { source: options.source, groupId, installId: id, members: list },
      );
    }
  }

  /** Before joining: refuses a group that has a member of another install (see {@link KafkaGroupInUseError}). */
  async function checkGroupBeforeJoin(id: string): Promise<void> {
    const members = await groupMembers(kafka, groupId);
    const { others, unnamed } = installFields(members, id);
    const list = members.map((m) => `${m.clientId}@${m.clientHost}`);
    if (others.length > 0) {
      throw new KafkaGroupInUseError({
        source: options.source,
        groupId,
        installId: id,
        otherInstallIds: others,
        members: list,
      });
    }
    if (unnamed.length > 0) {
      logger.warn(
        'Kafka consumer group has members that name no QueueBox install (an older QueueBox, another program or an MSK trigger): if they are not this install, the records are split between them',
        { source: options.source, groupId, installId: id, members: list },
      );
    }
  }
  /** The assigned partitions with the group's committed offsets (best effort: undefined offsets when unreadable). */
  async function positions(): Promise<KafkaPartitionPosition[]> {
    const topics = Object.keys(assigned);
    const committed = new Map<string, string>();
    if (topics.length > 0 && !stopping) {
      const admin: Admin = kafka.admin();
      let timer: NodeJS.Timeout | undefined;
      try {
        const entries = await Promise.race([
          admin.connect().then(() => admin.fetchOffsets({ groupId, topics })),
          new Promise<never>((_, reject) => {
            timer = setTimeout(() => reject(new Error('timed out')), 5000);
          }),
        ]);
        for (const entry of entries) {
          for (const p of entry.partitions) committed.set(`${entry.topic}/${p.partition}`, p.offset);
        }
      } catch {
        // The offsets are context only.
      } finally {
        clearTimeout(timer);
        await admin.disconnect().catch(() => undefined);
      }
    }
    return topics.flatMap((topic) =>
      (assigned[topic] ?? []).map((partition) => ({
        topic,
        partition,
        committedOffset: committed.get(`${topic}/${partition}`),
      })),
    );
  }
  const report = (error: unknown, during: 'ingest' | 'commit' | 'consume') => {
    try {
      options.onError?.(error, { during });
    } catch {
      // A logging hook must not stop the consumer.
    }
  };
  consumer.on(consumer.events.CRASH, (event) => {
    const error = event.payload.error;
    if (isKafkaFetchDecodeError(error)) {
      // Said with where the group stands, so the stalled partition can be found.
      void positions().then((at) => report(new KafkaFetchDecodeError(at, error), 'consume'));
    } else {
      report(error, 'consume');
    }
    // kafkajs restarts by itself after a retriable error only. After any other (a bug in the batch handler, a
    // record it cannot read) it has disconnected and stays out of the group: the partitions would stall for good.
    if (!event.payload.restart && !stopping && !rejoining) void rejoin();
  });

  /** Whether a rejoin runs: a second crash meanwhile must not start another one that disconnects the first's. */
  let rejoining = false;

  /** Joins the group again after a crash kafkajs does not restart from, every `retryDelayMs` until it works. */
  async function rejoin(): Promise<void> {
    rejoining = true;
    try {
      while (!stopping) {
        await pause(retryDelayMs);
        if (stopping) return;
        try {
          // No group check: the source was started; a member of another install is an ERROR of the join.
          await join();
          return;
        } catch (error) {
          report(error, 'consume');
          await consumer.disconnect().catch(() => undefined);
        }
      }
    } finally {
      rejoining = false;
    }
  }

  const pause = (ms: number) =>
    new Promise<void>((resolve) => {
      if (stopping) return resolve();
      const wake = () => {
        clearTimeout(timer);
        wakers.delete(wake);
        resolve();
      };
      const timer = setTimeout(wake, ms);
      wakers.add(wake);
    });

  /** The timers that resume a partition paused after a failed record (cleared by `close`). */
  const resumeTimers = new Set<NodeJS.Timeout>();

  /**
   * Pauses the batch's partition for `retryDelayMs` (kafkajs leaves it out of its fetches meanwhile), then resumes
   * it: the next fetch of it starts at the first record not resolved, the one that failed. kafkajs keeps a
   * partition's pause across a rejoin of the same run, so the timer resumes it even after a rebalance.
   */
  function pausePartition(pauseBatch: () => () => void): void {
    const resume = pauseBatch();
    const timer = setTimeout(() => {
      resumeTimers.delete(timer);
      resume();
    }, retryDelayMs);
    resumeTimers.add(timer);
  }

  /**
   * A batch whose records were all filtered out (an aborted transaction, transaction markers) never reaches
   * `eachBatch`: kafkajs resolves its last offset but, without auto-commit, commits nothing, so the group's lag
   * would stay above zero until a later record of the partition is stored. No record in it is to be stored, so its
   * end is committed here, with `consumer.commitOffsets` (no batch helper exists outside `eachBatch`; kafkajs retries
   * it for a while: should it land after a later commit, the offset only goes back to records already stored, which
   * a restart would store again as duplicates, never past one not stored).
   */
  consumer.on(consumer.events.END_BATCH_PROCESS, (event) => {
    const { topic, partition, batchSize, lastOffset } = event.payload;
    if (batchSize !== 0 || stopping) return;
    if (mustRejoin && FENCED_ERROR_TYPES.has(mustRejoin.type)) return;
    consumer
      .commitOffsets([{ topic, partition, offset: (BigInt(lastOffset) + 1n).toString() }])
      .catch((error: unknown) => {
        mustRejoin ??= kafkaRejoinError(error);
        report(error, 'commit');
      });
  });

  async function join() {
    await consumer.connect();
    for (const topic of options.topics) {
      await consumer.subscribe({ topic, fromBeginning: options.fromBeginning ?? true });
    }
    await consumer.run({
      autoCommit: false,
      eachBatchAutoResolve: false,
      eachBatch: async ({
        batch,
        resolveOffset,
        heartbeat,
        commitOffsetsIfNecessary,
        isRunning,
        isStale,
        pause: pauseBatch,
      }) => {
        const { topic, partition } = batch;
        /** The offset to commit (the next record to store), and the one committed last. */
        let next: string | undefined;
        let committed: string | undefined;
        let storedSinceCommit = 0;
        let lastCommitAt = Date.now();
        const commit = async () => {
          if (next === undefined || next === committed) return;
          if (mustRejoin && FENCED_ERROR_TYPES.has(mustRejoin.type)) return; // it would be refused
          const upTo = next;
          storedSinceCommit = 0;
          lastCommitAt = Date.now();
          try {
            // The consumer group's own commit: unlike `consumer.commitOffsets`, it also works while the consumer
            // stops (kafkajs's runner drops commits once it no longer runs), and it does not retry for seconds.
            await commitOffsetsIfNecessary({
              topics: [{ topic, partitions: [{ partition, offset: upTo }] }],
            });
            committed = upTo;
          } catch (error) {
            // Not fatal: the records are stored, so a redelivery only yields duplicates.
            mustRejoin ??= kafkaRejoinError(error);
            report(error, 'commit');
          }
        };
        const commitIfDue = async () => {
          if (storedSinceCommit >= commitEveryRecords || Date.now() - lastCommitAt >= commitIntervalMs) {
            await commit();
          }
        };
        const beat = async () => {
          try {
            await heartbeat();
          } catch (error) {
            // A rebalance or an eviction ends the batch; other failures (the broker unreachable) kafkajs meets
            // again on its next request.
            mustRejoin ??= kafkaRejoinError(error);
          }
        };
        const alive = () => !stopping && mustRejoin === undefined && isRunning() && !isStale();
        let stored = 0;
        for (const record of batch.messages) {
          if (!alive()) break;
          let message: BrokerMessage;
          try {
            message = consumedRecordMessage(topic, partition, record);
          } catch (error) {
            // A record whose headers cannot be read is stored without them rather than stall its partition.
            report(error, 'consume');
            message = consumedRecordMessage(topic, partition, { ...record, headers: {} });
          }
          let result: BrokerIngestResult;
          try {
            result = await options.ingestion.ingest(options.source, message);
          } catch (error) {
            report(error, 'ingest');
            // Retried from a later fetch, not here: kafkajs fetches again only once every batch of this fetch is
            // handled, so waiting here would hold up the member's other partitions too (one poison record would
            // stall them all until it goes dead). The record is not resolved, so the fetch after the pause starts
            // at it: nothing later in its partition is stored before it.
            if (!stopping) pausePartition(pauseBatch);
            break;
          }
          // For the batch's last record kafkajs resolves up to the batch's last offset (a transaction marker after it).
          resolveOffset(record.offset);
          stored++;
          next = (BigInt(record.offset) + 1n).toString();
          storedSinceCommit++;
          options.onIngested?.(result, message);
          await beat();
          await commitIfDue();
        }
        // Every record stored: commit past the batch's last offset, which may be a transaction marker or an aborted
        // record after them (kafkajs filters those out), so the group's lag reaches zero.
        if (stored === batch.messages.length) next = (BigInt(batch.lastOffset()) + 1n).toString();
        await commit();
        // Thrown back to kafkajs's runner, which rejoins the group at once (as it does when its own heartbeat
        // fails). It still hands over the fetch's other batches first: they end before their first record.
        if (mustRejoin && !stopping) throw mustRejoin;
      },
    });
  }

  return {
    async start() {
      if (installId !== undefined) await checkGroupBeforeJoin(installId);
      await join();
    },
    async close() {
      stopping = true;
      for (const wake of [...wakers]) wake();
      for (const timer of resumeTimers) clearTimeout(timer);
      resumeTimers.clear();
      // Bounded: while a join is pending (the group waits out a crashed member's session), kafkajs's disconnect waited
      // for it, and a SIGTERM right after a restart took 27 s (the crash soak). Past the bound the process goes on
      // stopping; the stored records' offsets were committed batch by batch, and the group drops the member after
      // its session.
      const disconnecting = consumer.disconnect();
      let bound: NodeJS.Timeout | undefined;
      try {
        const late = await Promise.race([
          disconnecting.then(() => false),
          new Promise<boolean>((resolve) => {
            bound = setTimeout(() => resolve(true), CONSUMER_CLOSE_WAIT_MS);
          }),
        ]);
        // Its failure after the bound is nobody's to handle.
        if (late) disconnecting.catch(() => undefined);
      } finally {
        clearTimeout(bound);
      }
    },
  };
}
