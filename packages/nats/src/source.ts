import {
  AckPolicy,
  type Consumer,
  type ConsumerMessages,
  DeliverPolicy,
  JetStreamApiCodes,
  JetStreamApiError,
  type JsMsg,
  jetstream,
  jetstreamManager,
} from '@nats-io/jetstream';
import { type MsgHdrs, type NatsConnection, nanos } from '@nats-io/transport-node';
import type { BrokerIngestionPort, BrokerIngestResult, BrokerMessage, Logger } from '@queuebox/core';
import { silentLogger, sleepUnlessAborted } from '@queuebox/core';
import { createNatsConnection, type NatsConnectionOptions } from './connection.ts';

/** `sources.<name>` of `type: nats`, the fields the source reads (the validated configuration fits). */
export interface NatsSourceOptions {
  readonly servers: readonly string[];
  /** The JetStream stream. */
  readonly stream: string;
  /** The durable pull consumer. Default `queuebox-{source}`. */
  readonly durable?: string;
  /** Filter subject of the consumer. Default: every subject of the stream. */
  readonly subject?: string;
  /** Messages per fetch. Default 100. */
  readonly batchSize?: number;
}

/** Options of a JetStream source. */
export interface NatsSourceDeps extends NatsSourceOptions, Omit<NatsConnectionOptions, 'servers' | 'name'> {
  /** The source's name: what `ingest` is called with. */
  readonly source: string;
  readonly ingestion: BrokerIngestionPort;
  /**
   * Create the stream (subjects: `subject`, else `{stream}.>`) and the durable consumer when they do not exist.
   * Default true. With false a missing stream or consumer is an error of every pull.
   */
  readonly createMissing?: boolean;
  /** Redelivery delay of a message whose ingestion failed (`nak(delay)`). Default 1000 ms. */
  readonly retryDelayMs?: number;
  /** Longest wait of one fetch for its batch to fill. Default 2000 ms (at least 1000). */
  readonly fetchExpiresMs?: number;
  /** Ack wait of a created consumer: a message not acked by then is redelivered. Default 30000 ms. */
  readonly ackWaitMs?: number;
  readonly onIngested?: (result: BrokerIngestResult, message: BrokerMessage) => void;
  readonly onError?: (error: unknown, context: { readonly during: 'ingest' | 'fetch' | 'setup' }) => void;
  /**
   * Where the source says what is not a failure but needs a look: a WARN when it had to create its durable
   * consumer again after it had been set up (see `createNatsSource`). Default silent.
   */
  readonly logger?: Logger;
}

/** What one pull did. */
export interface NatsPullReport {
  readonly fetched: number;
  readonly stored: number;
  readonly duplicate: number;
  readonly dead: number;
  /** Messages given back with `nak(retryDelayMs)` after an ingestion failure (nothing stored for them). */
  readonly nacked: number;
  readonly wakeRelay: boolean;
  /** `empty`: nothing (more) to fetch; `time`: the deadline came; `error`: an ingestion, fetch or setup failure. */
  readonly stoppedFor: 'empty' | 'time' | 'error' | 'aborted';
  /** The failure behind `error`. */
  readonly error?: unknown;
}

/** A JetStream source. */
export interface NatsSource {
  /**
   * Fetches and stores bounded batches until the consumer has nothing pending, the deadline comes, or a failure:
   * the body of functions/nats-source-tick.ts. Never throws; the report says what happened.
   */
  pull(budget: { readonly deadline: number; readonly signal?: AbortSignal }): Promise<NatsPullReport>;
  /**
   * Pulls until `signal` aborts (the local runtime): again `idleMs` (default 250) after a pull found nothing, and
   * `errorDelayMs` (default 1000) after a failure.
   */
  run(
    signal: AbortSignal,
    pauses?: { readonly idleMs?: number; readonly errorDelayMs?: number },
  ): Promise<void>;
  close(): Promise<void>;
}

/**
 * The inbox message of a JetStream message: `Nats-Msg-Id` as its id, and as the default key (what the inbox
 * deduplicates on when the message has no id and the source configures no key) `{stream}:{sequence}@{stored}`,
 * where `stored` is the time the server stored the message, in nanoseconds since the epoch (from the delivery's
 * ack subject). Both are fixed once the message is in the stream, so every redelivery, to any consumer, has the
 * same key; the time tells apart the messages of a stream deleted and created again under the same name, whose
 * sequences start at 1 again (the sequence alone would make a new message a duplicate of an old row the inbox
 * still keeps, acked and lost).
 */
export function jetStreamMessage(
  stream: string,
  message: Pick<JsMsg, 'data' | 'headers' | 'seq' | 'timestampNanos'>,
): BrokerMessage {
  const headers: Record<string, string> = {};
  const hdrs: MsgHdrs | undefined = message.headers;
  if (hdrs) {
    for (const [name, values] of hdrs) {
      if (name !== '__proto__') headers[name] = values.join(', ');
    }
  }
  const msgId = hdrs?.get('Nats-Msg-Id');
  return {
    body: message.data,
    headers,
    messageId: msgId ? msgId : undefined,
    defaultIdempotencyKey: `${stream}:${message.seq}@${message.timestampNanos}`,
  };
}

function isApiError(error: unknown, code: number): boolean {
  return error instanceof JetStreamApiError && error.code === code;
}

/**
 * Whether an error says the durable consumer (or its stream) is gone: deleted, or the stream deleted and perhaps
 * recreated under the same name. The consumer must then be set up again (created, with `createMissing`).
 */
export function isConsumerGone(error: unknown): boolean {
  let current: unknown = error;
  for (let depth = 0; current instanceof Error && depth < 4; depth++) {
    if (
      isApiError(current, JetStreamApiCodes.ConsumerNotFound) ||
      isApiError(current, JetStreamApiCodes.StreamNotFound)
    ) {
      return true;
    }
    // nats.js's JetStreamStatusError (not exported) for a `409 Consumer Deleted` during a fetch.
    const deleted = (current as { isConsumerDeleted?: unknown }).isConsumerDeleted;
    if (typeof deleted === 'function' && deleted.call(current) === true) return true;
    current = (current as { cause?: unknown }).cause;
  }
  return false;
}

/**
 * A JetStream durable pull consumer as an inbox source, for functions/nats-source-tick.ts (`pull` within the
 * function's budget) and the local runtime (`run`). Each message is handed to the broker ingestion and acked only
 * after it resolved (the inbox row, pending or dead, committed); the acks are flushed before `pull` returns. When
 * ingestion fails (the database is unavailable, or a bug), that message and the rest of its batch are `nak`ed
 * with `retryDelayMs`, so the server redelivers them later, and the pull stops.
 *
 * Stream and consumer: created when missing (default `createMissing: true`): a file-storage stream named
 * `stream` with subjects [`subject` ?? `{stream}.>`], and a durable consumer `durable` (default
 * `queuebox-{source}`) with explicit acks, deliver-all, `filter_subject` = `subject`, `ack_wait` = `ackWaitMs`.
 * Existing ones are used as they are. When a pull finds the consumer or its stream gone (deleted, or the stream
 * deleted and recreated), the next pull sets them up again, creating them again with `createMissing`.
 *
 * A consumer created again delivers the stream from its first message (deliver-all, so nothing published while
 * it was missing is skipped): messages still within the inbox's retention are duplicates of their rows (the
 * default key of `jetStreamMessage`, or their `Nats-Msg-Id`), but older ones the stream still holds are stored
 * again as new rows. So a consumer created after the first set-up is logged as a WARN (`logger`) naming the stream
 * and the consumer.
 */
export function createNatsSource(deps: NatsSourceDeps): NatsSource {
  const durable = deps.durable ?? `queuebox-${deps.source}`;
  const batchSize = deps.batchSize ?? 100;
  const retryDelayMs = deps.retryDelayMs ?? 1000;
  const fetchExpiresMs = Math.max(1000, deps.fetchExpiresMs ?? 2000);
  const connection = createNatsConnection({ ...deps, name: `queuebox source ${deps.source}` });
  const consumers = new WeakMap<NatsConnection, Promise<Consumer>>();
  const logger = deps.logger ?? silentLogger;
  /** Whether a set-up succeeded before: a consumer created after that one replaces a deleted one. */
  let setUpBefore = false;
  let fetching: ConsumerMessages | undefined;
  const report = (error: unknown, during: 'ingest' | 'fetch' | 'setup') => {
    try {
      deps.onError?.(error, { during });
    } catch {
      // A logging hook must not break the source.
    }
  };

  async function setUp(nc: NatsConnection): Promise<Consumer> {
    const jsm = await jetstreamManager(nc);
    if (deps.createMissing ?? true) {
      let streamCreated = false;
      try {
        await jsm.streams.info(deps.stream);
      } catch (error) {
        if (!isApiError(error, JetStreamApiCodes.StreamNotFound)) throw error;
        await jsm.streams.add({ name: deps.stream, subjects: [deps.subject ?? `${deps.stream}.>`] });
        streamCreated = true;
      }
      try {
        await jsm.consumers.info(deps.stream, durable);
      } catch (error) {
        if (!isApiError(error, JetStreamApiCodes.ConsumerNotFound)) throw error;
        // Deliver-all also when it replaces a deleted consumer: starting at new messages would skip those
        // published while it was missing. What the inbox no longer keeps is stored again (see the WARN).
        await jsm.consumers.add(deps.stream, {
          durable_name: durable,
          ack_policy: AckPolicy.Explicit,
          deliver_policy: DeliverPolicy.All,
          ack_wait: nanos(deps.ackWaitMs ?? 30_000),
          ...(deps.subject === undefined ? {} : { filter_subject: deps.subject }),
        });
        if (setUpBefore) {
          logger.warn(
            streamCreated
              ? 'JetStream stream and durable consumer were gone and have been created again; messages published while the stream was missing are not in it'
              : 'JetStream durable consumer was gone and has been created again with deliver-all: the stream is delivered from its first message, and messages older than the inbox retention are stored again as new rows',
            { source: deps.source, stream: deps.stream, consumer: durable, streamCreated },
          );
        }
      }
    }
    const consumer = await jetstream(nc).consumers.get(deps.stream, durable);
    setUpBefore = true;
    return consumer;
  }

  async function consumer(): Promise<{ nc: NatsConnection; consumer: Consumer }> {
    const nc = await connection.get();
    let ready = consumers.get(nc);
    if (!ready) {
      const settingUp = setUp(nc);
      ready = settingUp;
      consumers.set(nc, settingUp);
      // A failed set-up is tried again by the next pull.
      settingUp.catch(() => forget(nc, settingUp));
    }
    return { nc, consumer: await ready };
  }

  /** Drops the set-up of `nc` (if it is still `which`), so the next pull sets the consumer up again. */
  function forget(nc: NatsConnection, which: Promise<Consumer>) {
    if (consumers.get(nc) === which) consumers.delete(nc);
  }

  /** After a failure: when it says the consumer or its stream is gone, the next pull sets them up again. */
  function forgetIfGone(nc: NatsConnection, error: unknown) {
    if (!isConsumerGone(error)) return;
    const which = consumers.get(nc);
    if (which) forget(nc, which);
  }

  async function pull(budget: {
    readonly deadline: number;
    readonly signal?: AbortSignal;
  }): Promise<NatsPullReport> {
    const counts = { fetched: 0, stored: 0, duplicate: 0, dead: 0, nacked: 0 };
    let wakeRelay = false;
    const done = (stoppedFor: NatsPullReport['stoppedFor'], error?: unknown): NatsPullReport => ({
      ...counts,
      wakeRelay,
      stoppedFor,
      ...(error === undefined ? {} : { error }),
    });
    let nc: NatsConnection;
    let pullConsumer: Consumer;
    try {
      ({ nc, consumer: pullConsumer } = await consumer());
    } catch (error) {
      report(error, 'setup');
      return done('error', error);
    }
    for (;;) {
      if (budget.signal?.aborted) return done('aborted');
      const remaining = budget.deadline - Date.now();
      if (remaining < fetchExpiresMs) return done('time');
      let pending: number;
      let messages: ConsumerMessages;
      try {
        // Asking first keeps an idle tick to one round trip instead of a fetch that waits for its expiry.
        // Redeliveries (nak'ed, or not acked in time) count as ack-pending, not as pending.
        const info = await pullConsumer.info();
        pending = info.num_pending + info.num_ack_pending;
        if (pending === 0) return done('empty');
        messages = await pullConsumer.fetch({
          max_messages: Math.min(batchSize, pending),
          expires: fetchExpiresMs,
        });
      } catch (error) {
        forgetIfGone(nc, error);
        report(error, 'fetch');
        return done('error', error);
      }
      fetching = messages;
      const before = counts.fetched;
      let failure: unknown;
      try {
        for await (const message of messages) {
          counts.fetched += 1;
          if (failure !== undefined) {
            message.nak(retryDelayMs);
            counts.nacked += 1;
            continue;
          }
          const inbox = jetStreamMessage(deps.stream, message);
          try {
            const result = await deps.ingestion.ingest(deps.source, inbox);
            message.ack();
            counts[result.status] += 1;
            wakeRelay ||= result.wakeRelay;
            deps.onIngested?.(result, inbox);
          } catch (error) {
            report(error, 'ingest');
            failure = error;
            message.nak(retryDelayMs);
            counts.nacked += 1;
          }
        }
      } catch (error) {
        forgetIfGone(nc, error);
        report(error, 'fetch');
        failure ??= error;
      } finally {
        fetching = undefined;
      }
      try {
        // Acks are fire-and-forget; a function may be frozen right after it returns, so make sure they left.
        await nc.flush();
      } catch (error) {
        failure ??= error;
      }
      if (failure !== undefined) return done('error', failure);
      // Only redeliveries that are not due yet: they come back on a later pull.
      if (counts.fetched === before) return done('empty');
    }
  }

  return {
    pull,
    async run(signal, pauses = {}) {
      while (!signal.aborted) {
        const result = await pull({ deadline: Number.POSITIVE_INFINITY, signal });
        if (signal.aborted) break;
        // Nothing pending (or a failure): wait before asking again, waking early when aborted.
        const wait = result.stoppedFor === 'error' ? (pauses.errorDelayMs ?? 1000) : (pauses.idleMs ?? 250);
        await sleepUnlessAborted(wait, signal);
      }
    },
    async close() {
      fetching?.stop();
      await connection.close();
    },
  };
}
