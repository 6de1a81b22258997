import type { OutgoingMessage, Publisher, PublishOutcome } from '@queuebox/core';

/** One message made ready for a batch request: the entry under a request-local id, and its size. */
export interface PreparedEntry<E> {
  /** The request entry with the id the batch gives it (unique within one request). */
  readonly build: (id: string) => E;
  /** What the entry counts against the request's size limit, in bytes. */
  readonly bytes: number;
}

/** What the service answered for one entry of a batch request. */
export type EntryResult =
  | { readonly ok: true }
  | { readonly ok: false; readonly retryable: boolean; readonly error: string };

/** A failure of a whole request, classified. */
export interface RequestFailure {
  /** False when no retry can make the request succeed (the service refused its content). */
  readonly retryable: boolean;
  readonly error: string;
}

/** What a service adapter tells the batching publisher. */
export interface BatchServiceSpec<E> {
  /** The destination's name, for messages. */
  readonly name: string;
  /** The service's name in messages: `SQS`, `SNS`, `EventBridge`. */
  readonly service: string;
  /** Most entries in one request (10 for all three services). */
  readonly maxEntries: number;
  /** Most bytes of all entries of one request together. */
  readonly maxBatchBytes: number;
  /** Requests in flight at once. */
  readonly maxConcurrentRequests: number;
  /** The entry of one message, or why it can never be sent (→ answered `dead`, no request made). */
  prepare(message: OutgoingMessage): PreparedEntry<E> | { readonly dead: string };
  /**
   * Sends one request; resolves with one result per entry, by id. Rejects when the request as a whole failed (a
   * network error, a timeout, throttling, a refused request). `signal` aborts when no publish waits for the answer
   * any more (every caller aborted): pass it to the SDK (`abortSignal`), so the request stops holding its slot.
   */
  send(
    entries: ReadonlyArray<{ readonly id: string; readonly entry: E }>,
    signal: AbortSignal,
  ): Promise<ReadonlyMap<string, EntryResult>>;
  /** Classifies a rejection of `send`. */
  classify(error: unknown): RequestFailure;
  /** Releases the client. */
  close?(): Promise<void>;
}

interface Pending<E> {
  readonly prepared: PreparedEntry<E>;
  readonly resolve: (outcome: PublishOutcome) => void;
  done: boolean;
  /** Removes the publish's abort listener from the caller's signal. */
  release?: () => void;
  /** Set while the message is in a request: aborts that request once none of its messages awaits the answer. */
  leave?: () => void;
}

/**
 * core's `Publisher` over a batch API (SQS `SendMessageBatch`, SNS `PublishBatch`, EventBridge `PutEvents`).
 * Publishes that arrive in one turn of the event loop (the poller delivers one row per key at a time, different keys
 * at once) are packed into requests of at most `maxEntries` entries and `maxBatchBytes` bytes, sent up to
 * `maxConcurrentRequests` at a time. Each entry settles alone: the service's per-entry result decides `sent`,
 * `retry` or `dead` for that row only. A whole request that fails with a retryable error retries all its rows; one
 * that fails for its content is re-sent entry by entry, so only the culprit is answered `dead`.
 */
export function createBatchPublisher<E>(spec: BatchServiceSpec<E>): Publisher {
  let queue: Pending<E>[] = [];
  let scheduled = false;
  let closed = false;
  const inFlight = new Set<Promise<void>>();
  let running = 0;

  const settle = (item: Pending<E>, outcome: PublishOutcome) => {
    if (item.done) return;
    item.done = true;
    item.release?.();
    item.resolve(outcome);
  };

  async function request(batch: readonly Pending<E>[]): Promise<void> {
    const entries = batch.map((item, index) => ({
      id: `m${index}`,
      entry: item.prepared.build(`m${index}`),
    }));
    // A request nobody awaits any more (every publish in it aborted) is abandoned, so it frees its slot even when
    // the service never answers.
    const abandon = new AbortController();
    const leave = () => {
      if (batch.every((item) => item.done)) abandon.abort();
    };
    for (const item of batch) item.leave = leave;
    let results: ReadonlyMap<string, EntryResult>;
    try {
      results = await spec.send(entries, abandon.signal);
    } catch (error) {
      if (abandon.signal.aborted) return;
      const failure = spec.classify(error);
      if (!failure.retryable && batch.length > 1) {
        // One entry may have spoiled the request: each alone, so only that one is answered `dead`.
        for (const item of batch) if (!item.done) await request([item]);
        return;
      }
      const text = `${spec.service} refused the request for destination "${spec.name}": ${failure.error}`;
      for (const item of batch) {
        settle(item, failure.retryable ? { kind: 'retry', error: text } : { kind: 'dead', error: text });
      }
      return;
    }
    batch.forEach((item, index) => {
      const result = results.get(`m${index}`);
      if (result === undefined) {
        settle(item, {
          kind: 'retry',
          error: `${spec.service} gave no result for the message (destination "${spec.name}")`,
        });
      } else if (result.ok) {
        settle(item, { kind: 'sent' });
      } else {
        const text = `${spec.service} did not accept the message for destination "${spec.name}": ${result.error}`;
        settle(item, result.retryable ? { kind: 'retry', error: text } : { kind: 'dead', error: text });
      }
    });
  }

  /** Takes the next request's worth of entries off the queue: by count and by bytes. */
  function nextBatch(): Pending<E>[] {
    const batch: Pending<E>[] = [];
    let bytes = 0;
    while (queue.length > 0 && batch.length < spec.maxEntries) {
      const item = queue[0] as Pending<E>;
      if (item.done) {
        queue.shift();
        continue;
      }
      if (batch.length > 0 && bytes + item.prepared.bytes > spec.maxBatchBytes) break;
      queue.shift();
      batch.push(item);
      bytes += item.prepared.bytes;
    }
    return batch;
  }

  function pump() {
    while (running < spec.maxConcurrentRequests && queue.length > 0) {
      const batch = nextBatch();
      if (batch.length === 0) break;
      running += 1;
      const sent: Promise<void> = request(batch)
        .catch((error: unknown) => {
          for (const item of batch) settle(item, { kind: 'retry', error: String(error) });
        })
        .finally(() => {
          running -= 1;
          inFlight.delete(sent);
          pump();
        });
      inFlight.add(sent);
    }
  }

  function schedule() {
    if (scheduled) return;
    scheduled = true;
    // Gather what the current turn of the event loop publishes into full requests.
    setImmediate(() => {
      scheduled = false;
      pump();
    });
  }

  function publish(message: OutgoingMessage, signal?: AbortSignal): Promise<PublishOutcome> {
    if (closed) return Promise.resolve({ kind: 'retry', error: `the publisher of "${spec.name}" is closed` });
    if (signal?.aborted) return Promise.resolve({ kind: 'retry', error: 'aborted before publishing' });
    const prepared = spec.prepare(message);
    if ('dead' in prepared) return Promise.resolve({ kind: 'dead', error: prepared.dead });
    return new Promise((resolve) => {
      const item: Pending<E> = { prepared, resolve, done: false };
      // A message still waiting is taken back; for one in a request in flight the answer is no longer awaited (it
      // may still be accepted: a consumer sees the same message-id / deduplication id twice). The listener goes
      // when the message settles, so a caller's long-lived signal keeps none per message.
      if (signal) {
        const onAbort = () => {
          const waiting = queue.includes(item);
          if (waiting) queue = queue.filter((q) => q !== item);
          settle(item, {
            kind: 'retry',
            error: waiting ? 'aborted before publishing' : `aborted while waiting for ${spec.service}`,
          });
          item.leave?.();
        };
        signal.addEventListener('abort', onAbort, { once: true });
        item.release = () => signal.removeEventListener('abort', onAbort);
      }
      queue.push(item);
      schedule();
    });
  }

  return {
    publish,
    async close() {
      closed = true;
      // Requests in flight finish, and what still waits is sent, before the client goes.
      for (;;) {
        pump();
        if (inFlight.size === 0) break;
        await Promise.allSettled([...inFlight]);
      }
      await spec.close?.();
    },
  };
}
