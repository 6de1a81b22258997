import {
  createInbox,
  InvalidSubjectError,
  type Msg,
  type MsgHdrs,
  type NatsConnection,
  headers as natsHeaders,
  type Subscription,
} from '@nats-io/transport-node';
import type { ConfigIssue, OutgoingMessage, Publisher, PublishOutcome } from '@queuebox/core';
import { brokerPublishHeaders, ConfigError, renderTemplate, templatePlaceholders } from '@queuebox/core';
import {
  createNatsConnection,
  describeNatsError,
  NATS_CHECK_TIMEOUT_MS,
  type NatsConnectionOptions,
} from './connection.ts';

/** `destinations.<name>` of `type: nats` (the validated configuration fits as it is). */
export interface NatsDestinationOptions {
  readonly type?: 'nats';
  /** Server URLs, e.g. `nats://127.0.0.1:4222`. */
  readonly servers: readonly string[];
  /** Subject template with `{{ topic }}` and `{{ key }}`. Default `{{ topic }}`. */
  readonly subject?: string;
  /** Publish through JetStream and await its ack (true), or core NATS (false). Default true. */
  readonly jetstream?: boolean;
}

/** Options of the publisher: the destination plus tuning. */
export interface NatsPublisherOptions
  extends NatsDestinationOptions,
    Omit<NatsConnectionOptions, 'servers' | 'name'> {
  /** The destination's name, for error messages and the client name. Default `nats`. */
  readonly name?: string;
  /**
   * How long to wait for the JetStream ack (or, for core NATS, the server's flush). Default 10000 ms. When it runs
   * out, the connection is checked with a PING (answered within 2 s, see `NatsConnectionHandle.check`); a silent
   * one is replaced, so the next publishes go out on a live socket.
   */
  readonly timeoutMs?: number;
}

/**
 * How long into a connection's outage (a disconnect, until nats.js reconnects) a publish is given back untried
 * (`unstarted`, no attempt counted) rather than answered with a counted `retry`.
 */
export const NATS_RECONNECT_GRACE_MS = 30_000;
/** When a message given back untried during a reconnect is due again. */
export const NATS_RECONNECT_RECHECK_MS = 1000;

/** The wait for a JetStream ack, or a core publish's flush, ran out. */
class NatsTimeoutError extends Error {}

function retry(error: string): PublishOutcome {
  return { kind: 'retry', error };
}

/**
 * Why a message can never be published to `subject`, or undefined. NATS subjects are dot-separated tokens, none
 * empty, without spaces, tabs or line breaks (nats.js refuses those as `illegal subject`; an empty token, as in
 * `a..b` or `a.`, the server drops, so a JetStream publish would only ever time out or find no responders). A
 * wildcard token (`*`, `>`) is accepted by the server, but a stream stores the message under that literal subject
 * and a subscriber receives it as if it were on one: never what a row meant.
 */
export function unpublishableSubjectReason(subject: string): string | undefined {
  if (subject === '') return 'the subject is empty';
  if (/[ \t\r\n]/.test(subject)) return 'a subject cannot hold spaces, tabs or line breaks';
  const tokens = subject.split('.');
  if (tokens.some((token) => token === ''))
    return 'a subject cannot have an empty token (leading, trailing or double dot)';
  if (tokens.some((token) => token === '*' || token === '>')) {
    return 'a subject with a wildcard token (* or >) cannot be published to';
  }
  return undefined;
}

/**
 * JetStream's `err_code`s of a publish that no retry can turn into a store, whatever the stream does meanwhile:
 * - 10054 `JSStreamMessageExceedsMaximumErr`, the message is over the stream's `max_msg_size`;
 * - 10109 `JSStreamSealedErr`, the stream is sealed (it can never be unsealed);
 * - 10060 `JSStreamNotMatchErr`, the row's `Nats-Expected-Stream` header names another stream;
 * - 10070 `JSStreamWrongLastMsgIDErr` and 10071 `JSStreamWrongLastSequenceErr`, the row's
 *   `Nats-Expected-Last-Msg-Id` / `Nats-Expected-Last-Sequence` / `Nats-Expected-Last-Subject-Sequence` does not
 *   match: an optimistic-concurrency check that failed, which a later try finds failed too (the stream only moves on).
 * Others (a full stream, 10077, which may drain; no leader; a timeout) may heal and are retried.
 */
export const PERMANENT_JETSTREAM_ERROR_CODES: ReadonlySet<number> = new Set([
  10054, 10109, 10060, 10070, 10071,
]);

/** A JetStream error ack: the stream refused the message, with its `err_code`. */
class JetStreamRefusedError extends Error {
  readonly errCode: number | undefined;

  constructor(errCode: number | undefined, description: string | undefined) {
    super(`JetStream refused the message: ${description ?? 'error'} (${errCode ?? '?'})`);
    this.errCode = errCode;
  }
}

/**
 * Whether the publish was refused for good: an illegal subject or a message over the server's max_payload (nats.js),
 * or a JetStream refusal in {@link PERMANENT_JETSTREAM_ERROR_CODES}.
 */
function refusedForGood(error: unknown): boolean {
  if (error instanceof JetStreamRefusedError) {
    return error.errCode !== undefined && PERMANENT_JETSTREAM_ERROR_CODES.has(error.errCode);
  }
  if (error instanceof InvalidSubjectError) return true;
  if (!(error instanceof Error)) return false;
  return /illegal subject|invalid subject|max_payload/i.test(error.message);
}

function withTimeout<T>(work: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new NatsTimeoutError(`${what} took longer than ${ms} ms`)), ms);
  });
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}

/**
 * What to reject when a signal aborts, with one listener per signal: the publishes of a batch share the poller's
 * signal, and one `addEventListener` per message on it costs more the more are waiting (nats.js's EventTarget
 * checks every listener already there).
 */
interface AbortRegistry {
  /** Calls `reject` once `signal` aborts (at once if it has); the returned function forgets it. */
  onAbort(signal: AbortSignal | undefined, reject: (error: Error) => void): () => void;
}

const noop = () => undefined;

function abortRegistry(): AbortRegistry {
  const waiting = new WeakMap<AbortSignal, Set<(error: Error) => void>>();
  return {
    onAbort(signal, reject) {
      if (!signal) return noop;
      if (signal.aborted) {
        reject(new Error('aborted while waiting for NATS'));
        return noop;
      }
      let rejects = waiting.get(signal);
      if (!rejects) {
        const set = new Set<(error: Error) => void>();
        rejects = set;
        waiting.set(signal, set);
        signal.addEventListener(
          'abort',
          () => {
            waiting.delete(signal);
            const error = new Error('aborted while waiting for NATS');
            for (const each of set) each(error);
            set.clear();
          },
          { once: true },
        );
      }
      const set = rejects;
      set.add(reject);
      return () => set.delete(reject);
    },
  };
}

/** `work`, or a rejection as soon as `signal` aborts (the work itself goes on; its answer is ignored). */
function untilAborted<T>(
  work: Promise<T>,
  signal: AbortSignal | undefined,
  aborts: AbortRegistry,
): Promise<T> {
  if (!signal) return work;
  return new Promise<T>((resolve, reject) => {
    const forget = aborts.onAbort(signal, reject);
    work.then(
      (value) => {
        forget();
        resolve(value);
      },
      (error: unknown) => {
        forget();
        reject(error);
      },
    );
  });
}

/** One publish waiting for its JetStream ack. */
interface AckWaiter {
  readonly deadline: number;
  readonly resolve: () => void;
  readonly reject: (error: Error) => void;
  /** Drops the abort listener's hold on `reject` once the waiter is settled. */
  readonly forget: () => void;
}

/**
 * JetStream publishes with many acks outstanding on one connection: each message goes out as a plain publish whose
 * reply subject is `<inbox>.<n>`, and one wildcard subscription on `<inbox>.*` settles the waiters by `n`. This is
 * what `js.publish` does per message through `nc.request`, without its per-message timer, mux entry, promise chain
 * and the `RequestError("cancelled")` it builds after every answered request (see bench/README.md: 3,723 → 11,548
 * rows/s). The timeouts share one timer: the waiters are kept in publish order, and so in deadline order.
 */
interface JetStreamAcks {
  /**
   * Whether its subscription has ended (the server refused it, e.g. a permissions violation on `_INBOX.>`, or the
   * connection closed for good): no ack will ever arrive on it, so the next publish takes a new one.
   */
  readonly closed: boolean;
  /**
   * Fails every publish waiting for its ack now, with `error`: the connection they went out on was found dead, so
   * no ack will come (they are retried; one the stream stored before is dropped there as a duplicate).
   */
  abandon(error: Error): void;
  /** Resolves with the ack; rejects on an error ack, no responders, the timeout, or once `signal` aborts. */
  publish(
    subject: string,
    data: Uint8Array,
    headers: MsgHdrs,
    signal: AbortSignal | undefined,
  ): Promise<void>;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

function jetStreamAcks(nc: NatsConnection, timeoutMs: number, aborts: AbortRegistry): JetStreamAcks {
  const inbox = createInbox();
  const waiters = new Map<string, AckWaiter>();
  let next = 0;
  let timer: NodeJS.Timeout | undefined;

  const arm = (ms: number) => {
    // Unref'd: a pending ack keeps the process alive through its socket, not through this timer.
    timer = setTimeout(expire, ms);
    timer.unref();
  };
  const expire = () => {
    timer = undefined;
    const now = Date.now();
    for (const [token, waiter] of waiters) {
      if (waiter.deadline > now) return arm(waiter.deadline - now);
      waiters.delete(token);
      waiter.forget();
      waiter.reject(new NatsTimeoutError(`the JetStream ack took longer than ${timeoutMs} ms`));
    }
  };
  const failAll = (error: Error) => {
    for (const waiter of waiters.values()) {
      waiter.forget();
      waiter.reject(error);
    }
    waiters.clear();
  };

  const settle = (msg: Msg) => {
    const token = msg.subject.slice(inbox.length + 1);
    const waiter = waiters.get(token);
    if (waiter === undefined) return; // timed out already
    waiters.delete(token);
    waiter.forget();
    if (waiters.size === 0 && timer !== undefined) {
      clearTimeout(timer);
      timer = undefined;
    }
    if (msg.data.length === 0 && msg.headers?.code === 503) {
      waiter.reject(new Error('no responders: no JetStream stream takes this subject'));
      return;
    }
    let answer: { error?: { code?: number; err_code?: number; description?: string }; stream?: string };
    try {
      answer = JSON.parse(decoder.decode(msg.data));
    } catch {
      waiter.reject(new Error('invalid JetStream ack'));
      return;
    }
    if (answer.error) {
      const { description, err_code } = answer.error;
      waiter.reject(new JetStreamRefusedError(err_code, description));
    } else if (!answer.stream) {
      waiter.reject(new Error('invalid JetStream ack'));
    } else waiter.resolve();
  };

  let closed = false;
  const subscription: Subscription = nc.subscribe(`${inbox}.*`, {
    callback: (error, msg) => {
      if (error) {
        // nats.js closes the subscription right after this (a permissions violation): a later publish subscribes
        // anew, so a permission granted later (a configuration reload) is taken up without a restart.
        closed = true;
        failAll(new Error(describeNatsError(error)));
      } else settle(msg);
    },
  });
  // The subscription ended (a permission error, or the connection closed for good): every waiter fails now
  // rather than at its timeout.
  const ended = () => {
    closed = true;
    failAll(new Error('the NATS connection closed'));
  };
  void subscription.closed.then(ended, ended);

  return {
    get closed() {
      return closed;
    },
    abandon: failAll,
    publish(subject, data, headers, signal) {
      const token = (next++).toString(36);
      return new Promise<void>((resolve, reject) => {
        const deadline = Date.now() + timeoutMs;
        // An abort answers the caller at once; the waiter stays until its ack or deadline, which then settle a
        // promise already settled.
        const forget = aborts.onAbort(signal, reject);
        // Registered before the publish, which can throw (an invalid subject) — then it is taken out again.
        waiters.set(token, { deadline, resolve, reject, forget });
        try {
          nc.publish(subject, data, { headers, reply: `${inbox}.${token}` });
        } catch (error) {
          waiters.delete(token);
          forget();
          reject(error);
          return;
        }
        if (timer === undefined) arm(timeoutMs);
      });
    },
  };
}

/** The core publishes of one turn of the event loop on one connection, and the flush that will follow them. */
interface CoreTurn {
  readonly writes: (() => void)[];
  readonly flushed: Promise<void>;
}

/** Most rendered subjects kept per publisher; the cache starts over when full. */
const SUBJECT_CACHE_SIZE = 1000;

/**
 * The subject of a message: `template` rendered with its topic and key. A template without `{{ key }}` is rendered
 * once per topic and kept, since an outbox has few topics and every row would otherwise render it again.
 */
function subjectRenderer(template: string): (topic: string, key: string | null) => string {
  if (templatePlaceholders(template).includes('key')) {
    return (topic, key) => renderTemplate(template, { topic, key });
  }
  const rendered = new Map<string, string>();
  return (topic) => {
    let subject = rendered.get(topic);
    if (subject === undefined) {
      subject = renderTemplate(template, { topic });
      if (rendered.size >= SUBJECT_CACHE_SIZE) rendered.clear();
      rendered.set(topic, subject);
    }
    return subject;
  };
}

/**
 * Sets a row header as NATS can carry it, as the HTTP publisher does: a value NATS refuses (a line break) is sent
 * percent-encoded (UTF-8), and a name it refuses (a colon, white space: `base64:…` names that sources store for
 * header names whose bytes are not UTF-8, a Kafka header `Trace Id`) is left out. The row went dead for either (an
 * outside audit of encodings: a NATS → NATS bridge killed every message whose header name the first server had
 * taken), where the other publishers carried the message.
 */
function setHeader(hdrs: MsgHdrs, name: string, value: string): void {
  try {
    hdrs.set(name, value);
    return;
  } catch {
    // The name or the value: tried again with the value encoded, then left out.
  }
  try {
    hdrs.set(name, encodeURIComponent(value));
  } catch {
    // A name NATS refuses: left out.
  }
}

/**
 * core's `Publisher` for a NATS subject, on one connection per destination that is opened on first use, reused,
 * and reconnects by itself (see `createNatsConnection`).
 *
 * Each message: subject = the `subject` template (default `{{ topic }}`); data = the JSON payload; headers = the
 * row's, plus `message-id` (the message id) and `content-type: application/json`.
 * - `jetstream: true` (default): a JetStream publish with `msgID` = the message id, so the stream drops a repeat
 *   within its duplicate window (a retried attempt whose first ack was lost is stored once); its ack → `sent`
 *   (a duplicate ack too: the message is in the stream). No stream for the subject, no ack within `timeoutMs`, or
 *   no connection → `retry`.
 * - `jetstream: false`: a core publish followed by a flush (a round trip to the server, so the server has it; the
 *   publishes of one turn of the event loop share one flush and go out with it in one socket write);
 *   core NATS has no persistence, so subscribers that are not connected miss it. A flush that times out → `retry`,
 *   and the message may still go out later (a duplicate with the same `message-id`).
 * While the connection is down (between a disconnect and the client's reconnect) every publish is a `retry` at
 * once instead of waiting in the client's reconnect buffer.
 * What can never be published → `dead`: headers NATS cannot carry (e.g. a line break in a value), a
 * subject NATS refuses or a wildcard subject (see `unpublishableSubjectReason`), a message (payload and headers)
 * over the server's `max_payload`, and a JetStream refusal no retry can heal (over the stream's `max_msg_size`, a
 * sealed stream, a failed `Nats-Expected-*` check: see `PERMANENT_JETSTREAM_ERROR_CODES`).
 *
 * Row headers are passed as they are, JetStream's control headers too (but `Nats-Msg-Id`, which a JetStream publish
 * sets to the message id): a row or transform header `Nats-Rollup`, `Nats-Expected-Last-Sequence`, `Nats-TTL`, …
 * (spelled with that case: the server compares it) acts on the stream. A stream's `duplicate_window` shorter than
 * the outbox's claim lease lets a row redelivered after a crash be stored twice (see the README).
 */
export function createNatsPublisher(options: NatsPublisherOptions): Publisher {
  const name = options.name ?? 'nats';
  const subjectOf = subjectRenderer(options.subject ?? '{{ topic }}');
  const useJetStream = options.jetstream ?? true;
  const timeoutMs = options.timeoutMs ?? 10_000;
  const connection = createNatsConnection({
    ...options,
    name: `queuebox publisher ${name}`,
    serversPath: `destinations.${name}.servers`,
  });
  const clients = new WeakMap<NatsConnection, JetStreamAcks>();
  const turns = new WeakMap<NatsConnection, CoreTurn>();
  const aborts = abortRegistry();

  /**
   * A core publish, written at the end of this turn of the event loop together with the turn's other publishes and
   * the one flush that follows them all (the server answers a PING after it has processed everything sent before
   * it): one socket write per turn for the messages and the PING, where publishing at once took two (nats.js writes
   * the messages in a microtask, and the PING went out in a write of its own). Resolves once that flush is
   * answered; rejects when the publish itself throws (an invalid subject, a closed connection) or the flush fails.
   */
  function publishCore(
    nc: NatsConnection,
    subject: string,
    data: Uint8Array,
    headers: MsgHdrs,
  ): Promise<void> {
    let turn = turns.get(nc);
    if (turn === undefined) {
      const writes: (() => void)[] = [];
      let answer: { resolve: () => void; reject: (error: unknown) => void } = { resolve: noop, reject: noop };
      const flushed = new Promise<void>((resolve, reject) => {
        answer = { resolve, reject };
      });
      // Observed by every publish that went out; marked handled for a turn whose publishes all threw.
      flushed.catch(noop);
      setImmediate(() => {
        turns.delete(nc);
        for (const write of writes) write();
        // Called in this same task, so the PING joins the messages in nats.js's buffer before its microtask writes it.
        try {
          withTimeout(nc.flush(), timeoutMs, 'the NATS flush').then(answer.resolve, answer.reject);
        } catch (error) {
          answer.reject(error);
        }
      });
      turn = { writes, flushed };
      turns.set(nc, turn);
    }
    const { writes, flushed } = turn;
    return new Promise<void>((resolve, reject) => {
      writes.push(() => {
        try {
          nc.publish(subject, data, { headers });
        } catch (error) {
          reject(error);
          return;
        }
        flushed.then(resolve, reject);
      });
    });
  }

  /** The ack subscription of `nc`: a new one when there is none yet, or when the last one ended. */
  function jetStreamOf(nc: NatsConnection): JetStreamAcks {
    let js = clients.get(nc);
    if (!js || js.closed) {
      js = jetStreamAcks(nc, timeoutMs, aborts);
      clients.set(nc, js);
    }
    return js;
  }

  /**
   * The answer to a publish while the connection is down (between a disconnect and nats.js's reconnect): nothing is
   * written (it would sit in nats.js's buffer until a timeout), so the message surely did not go out. For the first
   * {@link NATS_RECONNECT_GRACE_MS} of the outage it is given back untried (`unstarted`: no attempt counted, due
   * again after {@link NATS_RECONNECT_RECHECK_MS}), so a half-open connection being replaced, a failover or a
   * network blip costs the waiting rows no attempts; after that, every answer counts an attempt as before, so a
   * server that stays away still ends rows dead after `maxAttempts`.
   */
  function whileDown(nc: NatsConnection): PublishOutcome {
    const error = 'the NATS connection is down; the client is reconnecting';
    return connection.downForMs(nc) < NATS_RECONNECT_GRACE_MS
      ? { kind: 'retry', error, unstarted: true, retryAfterMs: NATS_RECONNECT_RECHECK_MS }
      : retry(error);
  }

  /**
   * The error of a publish whose ack (or flush) timed out, after checking its connection: a connection that does
   * not answer a PING either is half-open (the network dropped it without a FIN or RST: nats.js's own pings would
   * notice only after `pingIntervalMs` × `maxPingOut`), so it is replaced now and the publishes still waiting on it
   * are failed at once. The message stays a plain retry, its attempt counted: it was written, and the stream may
   * have stored it (a retry is then dropped as a duplicate by its `Nats-Msg-Id` within the duplicate window).
   */
  async function afterTimeout(nc: NatsConnection, subject: string, error: Error): Promise<string> {
    const text = `NATS did not accept the message on "${subject}": ${error.message}`;
    if (await connection.check(nc)) return text;
    const dead = `the NATS connection did not answer a PING within ${NATS_CHECK_TIMEOUT_MS} ms either; a new connection is being opened`;
    clients.get(nc)?.abandon(new Error(`the JetStream ack did not come: ${dead}`));
    return `${text}; ${dead}`;
  }

  async function publish(message: OutgoingMessage, signal?: AbortSignal): Promise<PublishOutcome> {
    if (signal?.aborted) return retry('aborted before publishing');
    const subject = subjectOf(message.topic, message.key);
    const badSubject = unpublishableSubjectReason(subject);
    if (badSubject !== undefined) {
      return { kind: 'dead', error: `NATS cannot take the subject "${subject}" of "${name}": ${badSubject}` };
    }
    let hdrs: MsgHdrs;
    try {
      hdrs = natsHeaders();
      for (const [header, value] of Object.entries(brokerPublishHeaders(message)))
        setHeader(hdrs, header, value);
      if (!hdrs.has('content-type')) hdrs.set('content-type', 'application/json');
    } catch (error) {
      return { kind: 'dead', error: `NATS cannot carry the message headers: ${describeNatsError(error)}` };
    }
    const data = encoder.encode(JSON.stringify(message.payload));
    let nc: NatsConnection;
    try {
      nc = await connection.get();
    } catch (error) {
      return retry(describeNatsError(error));
    }
    if (!connection.isUp(nc)) return whileDown(nc);
    try {
      if (useJetStream) {
        hdrs.set('Nats-Msg-Id', message.id);
        await jetStreamOf(nc).publish(subject, data, hdrs, signal);
      } else {
        await untilAborted(publishCore(nc, subject, data, hdrs), signal, aborts);
      }
      return { kind: 'sent' };
    } catch (error) {
      if (error instanceof NatsTimeoutError) return retry(await afterTimeout(nc, subject, error));
      if (refusedForGood(error)) {
        const text = describeNatsError(error);
        const size = /max_payload/i.test(text)
          ? ` (a payload of ${data.length} bytes plus headers; the server's max_payload is ${nc.info?.max_payload ?? 'unknown'} bytes)`
          : '';
        return { kind: 'dead', error: `NATS refused the message on "${subject}": ${text}${size}` };
      }
      return retry(`NATS did not accept the message on "${subject}": ${describeNatsError(error)}`);
    }
  }

  return { publish, close: () => connection.close() };
}

/**
 * The factory for packages/outbox's `createPublishers` (`{ ...defaultPublisherFactories, nats:
 * natsPublisherFactory }`): checks the fields it needs and throws ConfigError naming them.
 */
export function natsPublisherFactory(name: string, options: { readonly type: string }): Publisher {
  const fields = options as unknown as Readonly<Record<string, unknown>>;
  const servers = fields.servers;
  const issues: ConfigIssue[] = [];
  if (!Array.isArray(servers) || servers.length === 0 || !servers.every((s) => typeof s === 'string')) {
    issues.push({ path: `destinations.${name}.servers`, message: 'must be a non-empty list of server URLs' });
  }
  if (fields.subject !== undefined && typeof fields.subject !== 'string') {
    issues.push({ path: `destinations.${name}.subject`, message: 'must be a template string' });
  }
  if (issues.length > 0) throw new ConfigError(issues);
  return createNatsPublisher({
    name,
    servers: servers as string[],
    subject: typeof fields.subject === 'string' ? fields.subject : undefined,
    jetstream: typeof fields.jetstream === 'boolean' ? fields.jetstream : undefined,
  });
}
