import {
  AckPolicy,
  type Consumer,
  type ConsumerConfig,
  type ConsumerMessages,
  DeliverPolicy,
  JetStreamApiCodes,
  JetStreamApiError,
  type JetStreamManager,
  type JsMsg,
  jetstream,
  jetstreamManager,
} from '@nats-io/jetstream';
import { type MsgHdrs, type NatsConnection, nanos } from '@nats-io/transport-node';
import type { BrokerIngestionPort, BrokerIngestResult, BrokerMessage, Logger } from '@queuebox/core';
import {
  brokerHeaderBytesText,
  isStoreUnavailable,
  QueueBoxError,
  silentLogger,
  sleepUnlessAborted,
} from '@queuebox/core';
import { createNatsConnection, type NatsConnectionOptions, NatsUnavailableError } from './connection.ts';

/**
 * The existing durable consumer cannot feed the inbox: its `ack_policy` is not `explicit`. With `all` an ack of a
 * later message acknowledges a message whose ingestion failed before it, and with `none` the server never waits
 * for an ack: either way such a message is never delivered again, lost without a row.
 */
export class NatsConsumerRefusedError extends QueueBoxError {}

/**
 * The durable consumer belongs to another QueueBox install: its `metadata` names another install id
 * ({@link NATS_INSTALL_ID_METADATA_KEY}). Two installs (other schemas or databases) on one durable would split its
 * messages, each inbox storing only part of them, so the source refuses it: the `setup` error of every pull until
 * the source is given a durable of its own (`sources.<name>.durable`). A {@link NatsConsumerRefusedError}.
 */
export class NatsDurableInUseError extends NatsConsumerRefusedError {
  readonly stream: string;
  readonly durable: string;
  /** The install id the durable's metadata names. */
  readonly otherInstallId: string;
  /** This source's install id. */
  readonly installId: string;
  constructor(details: {
    readonly source: string;
    readonly stream: string;
    readonly durable: string;
    readonly otherInstallId: string;
    readonly installId: string;
  }) {
    super(
      `JetStream durable consumer ${details.durable} of stream ${details.stream} belongs to another QueueBox install (${details.otherInstallId}; this one is ${details.installId}): sharing it would split its messages between the two inboxes. Source ${details.source} is not started; configure a durable of its own (sources.${details.source}.durable, e.g. ${details.durable}-${details.installId.slice(0, 8)})`,
    );
    this.stream = details.stream;
    this.durable = details.durable;
    this.otherInstallId = details.otherInstallId;
    this.installId = details.installId;
  }
}

/**
 * The key of a durable consumer's `metadata` (NATS server 2.10 and later) that names the QueueBox install (its
 * `store.installId()`) whose source created or adopted it.
 */
export const NATS_INSTALL_ID_METADATA_KEY = 'queuebox.install_id';

/** The first NATS server version that keeps a consumer's `metadata`. */
const METADATA_SINCE = [2, 10, 0] as const;

/** JetStream's `consumer already exists` (a create whose configuration differs from the existing consumer's). */
const CONSUMER_EXISTS = 10148;

/** Whether the server of `nc` (its INFO's `version`) keeps consumer metadata: 2.10.0 or later. */
export function natsServerKeepsMetadata(version: string | undefined): boolean {
  const parts = /^v?(\d+)\.(\d+)\.(\d+)/.exec(version ?? '');
  if (!parts) return false;
  for (let i = 0; i < 3; i++) {
    const have = Number(parts[i + 1]);
    const need = METADATA_SINCE[i] ?? 0;
    if (have !== need) return have > need;
  }
  return true;
}

/**
 * {@link NatsSourceOptions.maxBatchBytes}'s default: 32 MiB, half the server's default `max_pending` (64 MiB), so 32
 * messages of NATS's default `max_payload` (1 MiB) per fetch.
 */
export const DEFAULT_NATS_MAX_BATCH_BYTES = 32 * 1024 * 1024;

/** The largest message when the server does not say its `max_payload`: NATS's default, 1 MiB. */
const DEFAULT_MAX_PAYLOAD = 1024 * 1024;

/** A consumer set up on one connection. */
interface SetUp {
  readonly consumer: Consumer;
  /** The stream's `max_msg_size` when it sets one (and the source may read it), else undefined. */
  readonly maxMessageSize: number | undefined;
}

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
  /**
   * The most bytes one fetch may bring. The server writes a fetch's messages to the client at once, and closed the
   * connection as a slow consumer once they passed its `max_pending` (64 MiB by default): keep this below it. A
   * fetch asks for at most this ÷ the largest message the stream can hold (its `max_msg_size` when it sets one, else
   * the server's `max_payload`, 1 MiB by default) messages, at least one: 32 with the defaults. nats.js 3 takes no
   * message count together with a fetch's `max_bytes` (and a fetch by bytes alone asks for 100 messages whatever
   * `batchSize` says, waits for its expiry when fewer are there, and ends in `heartbeats missed` when the next
   * message does not fit), so the count carries the bound. Default 32 MiB ({@link DEFAULT_NATS_MAX_BATCH_BYTES}).
   */
  readonly maxBatchBytes?: number;
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
  /**
   * Redelivery delay (`nak(delay)`) of the messages given back after two ingestion failures in a row for another
   * reason than a store outage; a single such failure (a poison message) gives that message back alone, due again
   * after this × 2^deliveries, at most 60 s. Default 1000 ms.
   */
  readonly retryDelayMs?: number;
  /**
   * Pauses between the tries of a message held through a store outage (ingestion rejected with core's
   * `StoreUnavailableError`, also as a cause): the first, doubling up to the longest. Default 1000 ms and 30000 ms.
   */
  readonly unavailableRetryMs?: { readonly first?: number; readonly max?: number };
  /** Longest wait of one fetch for its batch to fill. Default 2000 ms (at least 1000). */
  readonly fetchExpiresMs?: number;
  /** Ack wait of a created consumer: a message not acked by then is redelivered. Default 30000 ms. */
  readonly ackWaitMs?: number;
  readonly onIngested?: (result: BrokerIngestResult, message: BrokerMessage) => void;
  readonly onError?: (error: unknown, context: { readonly during: 'ingest' | 'fetch' | 'setup' }) => void;
  /**
   * Told after every pull that ended without a failure (`empty` or `time`): the consumer answered and its fetches
   * worked, so a failure before (NATS away) is over even when no message comes to say so (the local runtime resets
   * its failure gauge with it, as it does with the RabbitMQ consumer's `onConsuming`).
   */
  readonly onConsuming?: () => void;
  /**
   * Where the source says what is not a failure but needs a look: a WARN when it had to create its durable
   * consumer again after it had been set up (see `createNatsSource`). Default silent.
   */
  readonly logger?: Logger;
  /**
   * The install id of the store the source writes to (`store.installId`, read once, at set-up). With it, on a NATS
   * server 2.10 or later, the durable consumer records it in its `metadata` ({@link NATS_INSTALL_ID_METADATA_KEY}):
   * a consumer the source creates carries it; an existing one without it (an older QueueBox's, or made by hand) is
   * adopted (the key added by a consumer update, an INFO line); and one that names another install is refused
   * ({@link NatsDurableInUseError}), since two installs on one durable split its messages. Replicas of one install
   * share the id and the durable. On an older server nothing is recorded or checked (a DEBUG line). Without it
   * (a program of its own) nothing is checked either.
   */
  readonly installId?: () => Promise<string>;
}

/** What one pull did. */
export interface NatsPullReport {
  readonly fetched: number;
  readonly stored: number;
  readonly duplicate: number;
  readonly dead: number;
  /**
   * Messages given back, nothing stored for them: with `nak(retryDelayMs)` after an ingestion failure other than a
   * store outage, and with a plain `nak` (redelivered at once) when the pull stopped while it held them through an
   * outage (its deadline came, its signal aborted, or the source was closed), or when its deadline came before their
   * turn in the batch.
   */
  readonly nacked: number;
  readonly wakeRelay: boolean;
  /**
   * `empty`: nothing (more) to fetch; `time`: the deadline came (also within a batch: its messages not stored yet
   * were given back); `error`: an ingestion, fetch or setup failure (also a store outage that outlasted the pull, and
   * a connection to NATS lost during a fetch: `NatsUnavailableError`, its messages not acked come again after the
   * ack wait).
   */
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
  const { headers, msgId } = headersOf(message);
  return {
    body: message.data,
    headers,
    messageId: msgId ? msgId : undefined,
    defaultIdempotencyKey: `${stream}:${message.seq}@${message.timestampNanos}`,
  };
}

/**
 * A message's headers as text (repeated values joined with `, `), read from the raw header block as nats.js reads
 * it (values trimmed), but byte by byte: a name or value whose bytes are not UTF-8 text a store can keep is
 * `base64:` + the base64 of its bytes (core's `brokerHeaderBytesText`, as the Kafka and AMQP sources store them),
 * where nats.js's decoding put U+FFFD in place of the bytes, so the stored header was neither the sent one nor
 * recognisable as changed. And nats.js throws on a name it would not write itself (a space, a byte outside
 * printable ASCII), which the server stores as any other client sent it: that threw out of the pull, which stopped
 * with the message neither acked nor given back, so it came first again after every ack wait, each time stopping
 * the pull before the messages behind it (and using up their deliveries). A message without its raw block (not
 * one nats.js received) is read through nats.js's headers.
 */
function headersOf(message: Pick<JsMsg, 'headers'>): {
  readonly headers: Record<string, string>;
  /** The first `Nats-Msg-Id` value (the name as JetStream matches it: exactly). */
  readonly msgId: string | undefined;
} {
  const headers: Record<string, string> = {};
  const lines = rawHeaderLines(message);
  if (lines !== undefined) {
    let msgId: string | undefined;
    for (const [name, value] of lines) {
      if (name === '__proto__') continue;
      headers[name] = Object.hasOwn(headers, name) ? `${headers[name]}, ${value}` : value;
      if (name === 'Nats-Msg-Id') msgId ??= value;
    }
    return { headers, msgId };
  }
  const hdrs: MsgHdrs | undefined = message.headers;
  if (hdrs) {
    for (const [name, values] of hdrs) {
      if (name !== '__proto__') headers[name] = values.join(', ');
    }
  }
  return { headers, msgId: hdrs?.get('Nats-Msg-Id') };
}

const CR = 0x0d;
const LF = 0x0a;
const COLON = 0x3a;

/**
 * The `name: value` lines of a message's raw header block (nats.js's own message, read past its types), each part
 * as core's `brokerHeaderBytesText` gives it; `undefined` when the message has no raw block to read.
 */
function rawHeaderLines(message: unknown): [string, string][] | undefined {
  const raw = (message as { msg?: { _rdata?: unknown; _msg?: { hdr?: unknown } } }).msg;
  const data = raw?._rdata;
  const length = raw?._msg?.hdr;
  if (!(data instanceof Uint8Array) || typeof length !== 'number') return undefined;
  const block = data.subarray(0, Math.max(0, length));
  const lines: [string, string][] = [];
  // The first line is `NATS/1.0` (and a status); each further line ends with CRLF.
  let start = block.indexOf(LF) + 1;
  while (start > 0 && start < block.length) {
    let end = start;
    while (end < block.length && !(block[end] === CR && block[end + 1] === LF)) end++;
    const line = block.subarray(start, end);
    const at = line.indexOf(COLON);
    if (at > 0) {
      const value = trimmed(line.subarray(at + 1));
      lines.push([brokerHeaderBytesText(line.subarray(0, at)), brokerHeaderBytesText(value)]);
    }
    start = end + 2;
  }
  return lines;
}

/** `bytes` without leading and trailing whitespace (what nats.js's `trim()` of a value takes off, in ASCII). */
function trimmed(bytes: Uint8Array): Uint8Array {
  const space = (byte: number | undefined) =>
    byte === 0x20 || byte === 0x09 || byte === CR || byte === LF || byte === 0x0b || byte === 0x0c;
  let from = 0;
  let to = bytes.length;
  while (from < to && space(bytes[from])) from++;
  while (to > from && space(bytes[to - 1])) to--;
  return bytes.subarray(from, to);
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
 * after it resolved (the inbox row, pending or dead, committed); the acks are flushed before `pull` returns.
 *
 * A store outage (ingestion rejects with core's `StoreUnavailableError`, also as a cause) does not give the message
 * back: every redelivery counts against the consumer's `max_deliver` (an operator's existing consumer may set one),
 * so naking it on every pull would make the server drop it after a few seconds of outage. The message and the rest
 * of its batch are held, unacknowledged and in order, while the held message is tried again after 1 s, doubling to
 * 30 s (`unavailableRetryMs`), and every held message gets an in-progress ack (`working()`: resets its ack wait
 * without a delivery) every quarter of the consumer's `ack_wait` (at most every 5 s). When the store answers, the
 * batch goes on where it stopped. When the pull stops first (its deadline: the next try would start after it; its
 * signal; `close`), the held messages are given back with a plain `nak`, redelivered at once, and the pull reports
 * the outage as its error: one delivery each, as a restart costs, and before the messages after them.
 *
 * Any other ingestion failure (a bug, a statement the database refuses) may be the message's own (a poison message):
 * that message alone is given back (`nak`), due again after `retryDelayMs` × 2^deliveries (at most 60 s), and the
 * batch goes on, so one poison message never holds up the others (nor lets a consumer's `max_deliver` drop them).
 * When the next message fails that way too, the failure is taken for the ingestion's own: that message and the rest
 * of the batch are given back with `retryDelayMs` and the pull stops.
 *
 * A fetch asks for at most `batchSize` messages and at most `maxBatchBytes` ÷ the largest message the stream can
 * hold (see {@link NatsSourceOptions.maxBatchBytes}); a connection lost during a fetch (the server closes a slow
 * consumer's) ends the pull with `NatsUnavailableError`. Before each message the pull checks its deadline: past it,
 * the rest of the batch is given back with a plain `nak` (due again at once) and the pull stops for `time`.
 *
 * Stream and consumer: created when missing (default `createMissing: true`): a file-storage stream named
 * `stream` with subjects [`subject` ?? `{stream}.>`] and no limits (it keeps every message), and a durable consumer
 * `durable` (default `queuebox-{source}`) with explicit acks, deliver-all, `filter_subject` = `subject`, `ack_wait` =
 * `ackWaitMs`. Existing ones are used as they are, but a consumer whose `ack_policy` is not `explicit` is refused
 * at set-up ({@link NatsConsumerRefusedError}), and one that filters other subjects than `subject` is a WARN
 * (`logger`). When a pull finds the consumer or its stream gone (deleted, or the stream deleted and recreated), the
 * next pull sets them up again, creating them again with `createMissing`.
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
  const maxBatchBytes = Math.max(1, deps.maxBatchBytes ?? DEFAULT_NATS_MAX_BATCH_BYTES);
  const retryDelayMs = deps.retryDelayMs ?? 1000;
  const firstUnavailablePauseMs = Math.max(1, deps.unavailableRetryMs?.first ?? 1000);
  const maxUnavailablePauseMs = Math.max(firstUnavailablePauseMs, deps.unavailableRetryMs?.max ?? 30_000);
  const fetchExpiresMs = Math.max(1000, deps.fetchExpiresMs ?? 2000);
  const connection = createNatsConnection({
    ...deps,
    name: `queuebox source ${deps.source}`,
    serversPath: `sources.${deps.source}.servers`,
  });
  const consumers = new WeakMap<NatsConnection, Promise<SetUp>>();
  const logger = deps.logger ?? silentLogger;
  /** Whether a set-up succeeded before: a consumer created after that one replaces a deleted one. */
  let setUpBefore = false;
  let fetching: ConsumerMessages | undefined;
  /** Aborted by `close`: ends a hold through a store outage. */
  const closing = new AbortController();
  const report = (error: unknown, during: 'ingest' | 'fetch' | 'setup') => {
    try {
      deps.onError?.(error, { during });
    } catch {
      // A logging hook must not break the source.
    }
  };

  async function setUp(nc: NatsConnection): Promise<SetUp> {
    const jsm = await jetstreamManager(nc);
    // Read before anything is created, so a consumer created now carries it (a store outage fails the set-up).
    const installId = deps.installId === undefined ? undefined : await deps.installId();
    const metadata =
      installId !== undefined && natsServerKeepsMetadata(nc.info?.version)
        ? { [NATS_INSTALL_ID_METADATA_KEY]: installId }
        : undefined;
    let maxMessageSize: number | undefined;
    if (deps.createMissing ?? true) {
      let streamCreated = false;
      try {
        maxMessageSize = (await jsm.streams.info(deps.stream)).config.max_msg_size;
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
        const created = await jsm.consumers
          .add(deps.stream, {
            durable_name: durable,
            ack_policy: AckPolicy.Explicit,
            deliver_policy: DeliverPolicy.All,
            ack_wait: nanos(deps.ackWaitMs ?? 30_000),
            ...(deps.subject === undefined ? {} : { filter_subject: deps.subject }),
            ...(metadata === undefined ? {} : { metadata }),
          })
          .then(
            () => true,
            (error: unknown) => {
              // Created meanwhile with another configuration (another install's metadata): checked below.
              if (isApiError(error, CONSUMER_EXISTS)) return false;
              throw error;
            },
          );
        if (created && setUpBefore) {
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
    const config = (await consumer.info(true)).config;
    checkConsumer(config);
    if (installId !== undefined) await checkInstall(jsm, nc, config, installId);
    if (!(deps.createMissing ?? true)) {
      // Only to size the fetches: a user allowed to consume but not to read the stream's info fetches as if the
      // stream set no `max_msg_size`.
      maxMessageSize = await jsm.streams
        .info(deps.stream)
        .then((info) => info.config.max_msg_size)
        .catch(() => undefined);
    }
    setUpBefore = true;
    return {
      consumer,
      maxMessageSize: maxMessageSize !== undefined && maxMessageSize > 0 ? maxMessageSize : undefined,
    };
  }

  /**
   * Refuses a consumer whose acks would lose a message whose ingestion failed (see
   * {@link NatsConsumerRefusedError}); warns when it filters other subjects than the source names.
   */
  function checkConsumer(config: ConsumerConfig): void {
    if (config.ack_policy !== AckPolicy.Explicit) {
      throw new NatsConsumerRefusedError(
        `JetStream consumer ${durable} of stream ${deps.stream} has ack_policy ${config.ack_policy}; source ${deps.source} needs ack_policy explicit (with all or none a message whose ingestion failed is never delivered again). Create the consumer with ack_policy explicit, or let the source create its own (another durable name)`,
      );
    }
    const filters = config.filter_subjects ?? (config.filter_subject ? [config.filter_subject] : []);
    const configured = deps.subject === undefined ? [] : [deps.subject];
    if (filters.join('\n') !== configured.join('\n')) {
      logger.warn(
        'JetStream consumer filters other subjects than the source configures; it is used as it is, so the source consumes what the consumer filters',
        {
          source: deps.source,
          stream: deps.stream,
          consumer: durable,
          filterSubjects: filters,
          subject: deps.subject ?? null,
        },
      );
    }
  }

  /** Whether the DEBUG line about a server without consumer metadata was written. */
  let saidNoMetadata = false;

  /**
   * Refuses a durable whose metadata names another install ({@link NatsDurableInUseError}); adopts one that names
   * none (adds the key; an INFO line). On a server before 2.10 there is no metadata to read or write: a DEBUG line.
   * Runs at set-up only (once per connection), never per message.
   */
  async function checkInstall(
    jsm: JetStreamManager,
    nc: NatsConnection,
    config: ConsumerConfig,
    installId: string,
  ): Promise<void> {
    const fields = { source: deps.source, stream: deps.stream, consumer: durable, installId };
    if (!natsServerKeepsMetadata(nc.info?.version)) {
      if (!saidNoMetadata) {
        saidNoMetadata = true;
        logger.debug(
          'NATS server keeps no consumer metadata (before 2.10): the durable consumer does not record this install, and a durable shared with another install is not detected',
          { ...fields, serverVersion: nc.info?.version ?? null },
        );
      }
      return;
    }
    const owner = config.metadata?.[NATS_INSTALL_ID_METADATA_KEY];
    if (owner === installId) return;
    if (owner !== undefined) {
      throw new NatsDurableInUseError({ ...fields, durable, otherInstallId: owner });
    }
    let now: string | undefined;
    try {
      await jsm.consumers.update(deps.stream, durable, {
        metadata: { ...config.metadata, [NATS_INSTALL_ID_METADATA_KEY]: installId },
      });
      // Read again: another install adopting it at the same moment wins with the later update, and this one says so.
      now = (await jsm.consumers.info(deps.stream, durable)).config.metadata?.[NATS_INSTALL_ID_METADATA_KEY];
    } catch (error) {
      // E.g. a user allowed to consume but not to edit consumers: used as before, unrecorded.
      logger.warn(
        'JetStream durable consumer names no install and could not be given this one (consumer update failed); it is used as it is, and a durable shared with another install is not detected',
        { ...fields, error: error instanceof Error ? error.message : String(error) },
      );
      return;
    }
    if (now !== undefined && now !== installId) {
      throw new NatsDurableInUseError({ ...fields, durable, otherInstallId: now });
    }
    logger.info(
      'JetStream durable consumer named no install (an older QueueBox or made by hand); it is adopted: its metadata now names this install',
      { ...fields, metadataKey: NATS_INSTALL_ID_METADATA_KEY },
    );
  }

  async function consumer(): Promise<{ nc: NatsConnection } & SetUp> {
    const nc = await connection.get();
    let ready = consumers.get(nc);
    if (!ready) {
      const settingUp = setUp(nc);
      ready = settingUp;
      consumers.set(nc, settingUp);
      // A failed set-up is tried again by the next pull.
      settingUp.catch(() => forget(nc, settingUp));
    }
    return { nc, ...(await ready) };
  }

  /** Drops the set-up of `nc` (if it is still `which`), so the next pull sets the consumer up again. */
  function forget(nc: NatsConnection, which: Promise<SetUp>) {
    if (consumers.get(nc) === which) consumers.delete(nc);
  }

  /** After a failure: when it says the consumer or its stream is gone, the next pull sets them up again. */
  function forgetIfGone(nc: NatsConnection, error: unknown) {
    if (!isConsumerGone(error)) return;
    const which = consumers.get(nc);
    if (which) forget(nc, which);
  }

  /**
   * When a message whose ingestion failed (no outage) is due again: `retryDelayMs` × 2 after its first delivery,
   * doubling with each delivery up to {@link MAX_POISON_DELAY_MS}, so a poison message costs a try now and then, not one per
   * pull, and the messages given back with `retryDelayMs` after a stop come before it.
   */
  function poisonDelayMs(message: JsMsg): number {
    const deliveries = Math.max(1, Math.min(30, message.info.deliveryCount));
    return Math.min(Math.max(retryDelayMs, MAX_POISON_DELAY_MS), retryDelayMs * 2 ** deliveries);
  }

  async function pull(budget: {
    readonly deadline: number;
    readonly signal?: AbortSignal;
  }): Promise<NatsPullReport> {
    const counts = { fetched: 0, stored: 0, duplicate: 0, dead: 0, nacked: 0 };
    let wakeRelay = false;
    const done = (stoppedFor: NatsPullReport['stoppedFor'], error?: unknown): NatsPullReport => {
      if (stoppedFor === 'empty' || stoppedFor === 'time') {
        try {
          deps.onConsuming?.();
        } catch {
          // A hook must not break the source.
        }
      }
      return { ...counts, wakeRelay, stoppedFor, ...(error === undefined ? {} : { error }) };
    };
    let nc: NatsConnection;
    let pullConsumer: Consumer;
    let maxMessageSize: number | undefined;
    try {
      ({ nc, consumer: pullConsumer, maxMessageSize } = await consumer());
    } catch (error) {
      report(error, 'setup');
      return done('error', error);
    }
    /** Stores one message and acks it; the failure, reported, when ingestion rejected. */
    /** The consumer's `max_deliver` (unlimited: -1 or 0), from its info before each fetch. */
    let maxDeliver = -1;
    const lastDelivery = (message: JsMsg) => maxDeliver > 0 && message.info.deliveryCount >= maxDeliver;
    const ingestOne = async (message: JsMsg): Promise<{ readonly error: unknown } | undefined> => {
      try {
        // Inside: a message that cannot even be mapped is a failure of its own (given back), never one that ends
        // the pull with it and the rest of its batch left unacknowledged.
        const mapped = jetStreamMessage(deps.stream, message);
        // On its last delivery a failure makes it a dead row: the server would drop it unstored (max_deliver).
        const inbox = lastDelivery(message) ? { ...mapped, lastDelivery: true } : mapped;
        const result = await deps.ingestion.ingest(deps.source, inbox);
        message.ack();
        counts[result.status] += 1;
        wakeRelay ||= result.wakeRelay;
        deps.onIngested?.(result, inbox);
        return undefined;
      } catch (error) {
        report(error, 'ingest');
        return { error };
      }
    };
    const giveBack = (message: JsMsg, delayMs?: number) => {
      try {
        message.nak(delayMs);
      } catch {
        // The connection is gone: the ack wait gives the message back.
      }
      counts.nacked += 1;
    };
    for (;;) {
      if (budget.signal?.aborted) return done('aborted');
      const remaining = budget.deadline - Date.now();
      if (remaining < fetchExpiresMs) return done('time');
      let pending: number;
      let ackWaitMs: number;
      let messages: ConsumerMessages;
      let disconnectsBefore = 0;
      try {
        // Asking first keeps an idle tick to one round trip instead of a fetch that waits for its expiry.
        // Redeliveries (nak'ed, or not acked in time) count as ack-pending, not as pending.
        const info = await pullConsumer.info();
        pending = info.num_pending + info.num_ack_pending;
        ackWaitMs = (info.config.ack_wait ?? 0) / 1_000_000;
        maxDeliver = info.config.max_deliver ?? -1;
        if (pending === 0) return done('empty');
        disconnectsBefore = connection.disconnects(nc);
        // Bounded by bytes too: the server wrote `batchSize` messages of any size at once, and closed the
        // connection as a slow consumer once they passed its `max_pending`: the acks sent meanwhile were lost.
        const largest = maxMessageSize ?? nc.info?.max_payload ?? DEFAULT_MAX_PAYLOAD;
        messages = await pullConsumer.fetch({
          max_messages: Math.min(batchSize, pending, Math.max(1, Math.floor(maxBatchBytes / largest))),
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
      /** The failure (no outage) of the message just before, when it failed: a second one in a row stops the pull. */
      let suspect: unknown;
      /**
       * The deadline came within the batch: the rest is given back. (An aborted signal, the local runtime stopping,
       * still lets the batch in hand be stored and acked.)
       */
      let late = false;
      // Held through a store outage, in order: fetched, neither acked nor given back (see createNatsSource).
      const held = new HeldMessages(ackWaitMs);
      // Read as they arrive, whatever the ingestion's pace (see ReadAhead).
      const inbound = new ReadAhead(messages, ackWaitMs);
      try {
        for (let message = await inbound.next(); message !== undefined; message = await inbound.next()) {
          counts.fetched += 1;
          if (failure === undefined && held.size === 0 && !late) late = Date.now() >= budget.deadline;
          if (failure !== undefined) {
            // Given back untried, as the pull is stopping; but on its last delivery a message given back is dropped
            // by the server, unstored: it is tried (stored, or a dead row with its failure).
            if (!lastDelivery(message) || (await ingestOne(message)) !== undefined)
              giveBack(message, retryDelayMs);
          } else if (late) {
            // Past the deadline (a Lambda's budget) the batch is not worked through: the rest goes back with a plain
            // nak, due again at once for the next pull, where it overran the deadline by the time the batch took
            // (and the function's timeout redelivered it only after the ack wait). The same exception as above for
            // a message on its last delivery: given back, the server would drop it unstored.
            if (!lastDelivery(message) || (await ingestOne(message)) !== undefined) giveBack(message);
          } else if (held.size > 0) {
            held.add(message);
          } else {
            const failed = await ingestOne(message);
            if (failed === undefined) {
              suspect = undefined;
              continue;
            }
            if (isStoreUnavailable(failed.error)) {
              held.add(message, failed.error);
            } else if (suspect === undefined) {
              // Maybe this message's own problem (a poison message: a transform function's bug on its payload):
              // only it is given back, later each time, and the batch goes on. Giving back the rest with it made
              // the next pull meet it first again, so nothing behind it was ever stored, and a consumer's
              // max_deliver dropped them all after a few pulls.
              suspect = failed.error;
              giveBack(message, poisonDelayMs(message));
            } else {
              // Two in a row: more likely the store or the ingestion itself; stop as before.
              failure = failed.error;
              giveBack(message, retryDelayMs);
            }
          }
        }
        // The fetch's own failure, once every message that arrived before it was handled (as `for await` did).
        if (inbound.failure !== undefined) throw inbound.failure.error;
      } catch (error) {
        forgetIfGone(nc, error);
        report(error, 'fetch');
        // Under a hold the fetch's own end (`heartbeats missed`: a slow failing ingest blocked the loop past the
        // fetch's heartbeats) is no failure of its own: the hold goes on with what was fetched. Otherwise the
        // held messages would be given back with a delay, one delivery spent per pull, as before holds existed.
        if (held.size === 0) failure ??= error;
      } finally {
        inbound.stop();
        fetching = undefined;
      }
      try {
        if (held.size > 0) {
          // A fetch that failed under the hold ends it as any other failure does.
          if (failure === undefined) failure = await holdThroughOutage(held, budget, ingestOne);
          // Given back at once after the outage (see createNatsSource); after another failure as today.
          const delayMs = failure === held.outage ? undefined : retryDelayMs;
          for (const message of held.release()) giveBack(message, delayMs);
        }
      } finally {
        held.release();
      }
      try {
        // Acks are fire-and-forget; a function may be frozen right after it returns, so make sure they left.
        await nc.flush();
      } catch (error) {
        failure ??= error;
      }
      if (failure === undefined && connection.disconnects(nc) !== disconnectsBefore) {
        // nats.js ends such a fetch as if it had found nothing more, and the acks it had in hand may be lost: the
        // messages come again after their ack wait (duplicates to the inbox). A failure, so it is seen.
        failure = new NatsUnavailableError(
          `The connection to NATS was lost during a fetch of source ${deps.source} (the server may have closed it as a slow consumer: a fetch of up to ${maxBatchBytes} bytes above its max_pending); messages not acked come again after the ack wait`,
        );
      }
      if (failure !== undefined) return done('error', failure);
      if (late) return done('time');
      // Only redeliveries that are not due yet: they come back on a later pull.
      if (counts.fetched === before) return done('empty');
    }
  }

  /**
   * Tries the held messages again, oldest first, after growing pauses, until they are all stored or the pull has to
   * stop. Resolves with `undefined` when the store took them all, with the outage when the pull stopped first (the
   * messages still held are then to be given back), or with another failure of a try (a failure of today's kind).
   */
  async function holdThroughOutage(
    held: HeldMessages,
    budget: { readonly deadline: number; readonly signal?: AbortSignal },
    ingestOne: (message: JsMsg) => Promise<{ readonly error: unknown } | undefined>,
  ): Promise<unknown> {
    // One signal for the pauses: the pull's own and `close`, listened to only while a hold lasts.
    const stop = new AbortController();
    const abort = () => stop.abort();
    const signals = [budget.signal, closing.signal].filter((s): s is AbortSignal => s !== undefined);
    for (const signal of signals) {
      if (signal.aborted) stop.abort();
      else signal.addEventListener('abort', abort, { once: true });
    }
    try {
      let pause = firstUnavailablePauseMs;
      for (;;) {
        if (stop.signal.aborted || Date.now() + pause >= budget.deadline) return held.outage;
        await sleepUnlessAborted(pause, stop.signal);
        if (stop.signal.aborted) return held.outage;
        pause = Math.min(pause * 2, maxUnavailablePauseMs);
        for (let next = held.first(); next !== undefined; next = held.first()) {
          // A try runs as long as the store takes to fail (a connect timeout): the pull must still end by its
          // deadline (a Lambda's), so it stops waiting then. A try that still succeeds stores the message, and
          // its redelivery after the nak is a duplicate the inbox answers as such.
          const failed = await beforeDeadline(ingestOne(next), budget.deadline, stop.signal);
          if (failed === 'late') return held.outage;
          if (failed === undefined) {
            held.stored();
            // A new outage after a stored message starts with short pauses again.
            pause = firstUnavailablePauseMs;
            continue;
          }
          if (!isStoreUnavailable(failed.error)) return failed.error;
          held.outage = failed.error;
          break;
        }
        if (held.size === 0) return undefined;
      }
    } finally {
      for (const signal of signals) signal.removeEventListener('abort', abort);
    }
  }

  /**
   * `work`'s answer, or `late` once `deadline` passed (or `signal` aborted) first; `work` goes on unwatched then.
   * An infinite deadline (the local runtime's `run`) waits for `work` as long as it takes, unless aborted.
   */
  async function beforeDeadline<T>(
    work: Promise<T>,
    deadline: number,
    signal: AbortSignal,
  ): Promise<T | 'late'> {
    let wait: NodeJS.Timeout | undefined;
    let onAbort: (() => void) | undefined;
    const late = new Promise<'late'>((resolve) => {
      onAbort = () => resolve('late');
      if (signal.aborted) onAbort();
      else signal.addEventListener('abort', onAbort, { once: true });
      if (Number.isFinite(deadline)) wait = setTimeout(onAbort, Math.max(0, deadline - Date.now()));
    });
    try {
      return await Promise.race([work, late]);
    } finally {
      clearTimeout(wait);
      if (onAbort !== undefined) signal.removeEventListener('abort', onAbort);
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
      closing.abort();
      fetching?.stop();
      await connection.close();
    },
  };
}

/**
 * The messages of one fetch, read from nats.js's iterator as soon as they arrive and handed out one at a time, at
 * the ingestion's pace; the ones received and not handed out yet, and the one being ingested, get an in-progress ack
 * (`working()`) every quarter of the consumer's ack wait (0.05 s to 5 s).
 *
 * Read one by one in step with the ingestion (`for await`), a batch whose ingestion took longer than about two of
 * the fetch's idle heartbeats (its expiry, 2 s: 100 messages at 20 ms each, a slow database or transform) ended in
 * nats.js's `heartbeats missed`: every message was stored, but the pull was reported failed, and
 * functions/nats-source-tick.ts failed its invocation. nats.js ends a fetch that received all its messages only when
 * the reader reaches that end, and its heartbeat monitor, which hears nothing more from the server meanwhile, fails
 * it first. And the messages waiting behind a slow one ran out of their ack wait: the server delivered them again,
 * one more delivery each against `max_deliver`, as duplicates.
 */
class ReadAhead {
  private readonly waiting: JsMsg[] = [];
  private current: JsMsg | undefined;
  private ended = false;
  private wake: (() => void) | undefined;
  private readonly timer: ReturnType<typeof setInterval>;
  /** How the fetch failed, once it did (after the messages received before). */
  failure: { readonly error: unknown } | undefined;

  constructor(messages: AsyncIterable<JsMsg>, ackWaitMs: number) {
    const keepAliveMs = ackWaitMs > 0 ? Math.min(5000, Math.max(50, ackWaitMs / 4)) : 5000;
    this.timer = setInterval(() => {
      if (this.current !== undefined) working(this.current);
      for (const message of this.waiting) working(message);
    }, keepAliveMs);
    void this.read(messages);
  }

  private async read(messages: AsyncIterable<JsMsg>): Promise<void> {
    try {
      for await (const message of messages) {
        this.waiting.push(message);
        this.wake?.();
      }
    } catch (error) {
      this.failure = { error };
    } finally {
      this.ended = true;
      this.wake?.();
    }
  }

  /** The next message, once one arrived; undefined once the fetch ended (see `failure`). */
  async next(): Promise<JsMsg | undefined> {
    for (;;) {
      const message = this.waiting.shift();
      if (message !== undefined) {
        this.current = message;
        return message;
      }
      this.current = undefined;
      if (this.ended) {
        this.stop();
        return undefined;
      }
      await new Promise<void>((resolve) => {
        this.wake = resolve;
      });
      this.wake = undefined;
    }
  }

  /** No more in-progress acks (the pull is done with the batch). */
  stop(): void {
    clearInterval(this.timer);
    this.current = undefined;
  }
}

/** The longest redelivery delay of a message whose ingestion keeps failing for a reason other than an outage. */
const MAX_POISON_DELAY_MS = 60_000;

/**
 * The messages of a batch held through a store outage, oldest first, and the in-progress acks that keep them: each
 * gets `working()` when it joins and then every quarter of the consumer's ack wait (0.05 s to 5 s), so the server
 * neither redelivers them nor counts a delivery against `max_deliver` while the store is away.
 */
class HeldMessages {
  private readonly messages: JsMsg[] = [];
  private timer: ReturnType<typeof setInterval> | undefined;
  private readonly keepAliveMs: number;
  /** The last failure of the outage. */
  outage: unknown;

  constructor(ackWaitMs: number) {
    this.keepAliveMs = ackWaitMs > 0 ? Math.min(5000, Math.max(50, ackWaitMs / 4)) : 5000;
  }

  get size(): number {
    return this.messages.length;
  }

  /** Holds `message` after the others; `outage`: the failure that started the hold. */
  add(message: JsMsg, outage?: unknown): void {
    if (outage !== undefined) this.outage = outage;
    this.messages.push(message);
    working(message);
    this.timer ??= setInterval(() => {
      for (const held of this.messages) working(held);
    }, this.keepAliveMs);
  }

  first(): JsMsg | undefined {
    return this.messages[0];
  }

  /** The first message was stored (and acked). */
  stored(): void {
    this.messages.shift();
    if (this.messages.length === 0) this.stop();
  }

  /** Ends the hold: the messages still held, for the caller to give back. */
  release(): JsMsg[] {
    this.stop();
    return this.messages.splice(0);
  }

  private stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }
}

function working(message: JsMsg): void {
  try {
    message.working();
  } catch {
    // The connection is gone: nothing keeps the message; its ack wait gives it back.
  }
}
