import type { Message, SQSClient } from '@aws-sdk/client-sqs';
import type { BrokerIngestionPort, BrokerIngestResult, BrokerMessage } from '@queuebox/core';
import { isStoreUnavailable, sleepUnlessAborted } from '@queuebox/core';
import { type AwsClientOptions, lazySdkClient, regionOfQueueUrl, sdkClientConfig } from './aws-client.ts';
import { sqsInboxMessage } from './sqs-messages.ts';
import { isFifoQueueUrl } from './sqs-publisher.ts';

/** `sources.<name>` of `type: sqs`, the fields the consumer reads (the validated configuration fits). */
export interface SqsSourceOptions extends AwsClientOptions {
  /** The queue URL. */
  readonly queueUrl: string;
  /** Messages per `ReceiveMessage`, 1–10. Default 10. */
  readonly batchSize?: number;
  /** Long-poll wait of one `ReceiveMessage`, 0–20 s. Default 20. */
  readonly waitTimeSeconds?: number;
}

/** Options of the long-polling consumer. */
export interface SqsConsumerOptions extends SqsSourceOptions {
  /** The source's name: what `ingest` is called with. */
  readonly source: string;
  readonly ingestion: BrokerIngestionPort;
  /**
   * When a message could not be stored for another reason than a store outage (a bug, a statement the database
   * refuses), it becomes visible again after this many seconds (`ChangeMessageVisibility`) instead of after the
   * queue's whole visibility timeout. Default 1.
   */
  readonly retryDelaySeconds?: number;
  /**
   * Pauses between the tries of a message held through a store outage (ingestion rejected with core's
   * `StoreUnavailableError`, also as a cause): the first, doubling up to the longest. Default 1000 ms and 30000 ms.
   */
  readonly unavailableRetryMs?: { readonly first?: number; readonly max?: number };
  /**
   * Visibility timeout the messages held through a store outage get (`ChangeMessageVisibilityBatch`) when the hold
   * starts and again every third of it, so they stay in flight while they wait. Default 60 s (2–43200).
   */
  readonly heldVisibilitySeconds?: number;
  /** A client to use instead of one built from the options (tests). It is not destroyed by `close`. */
  readonly client?: SQSClient;
  readonly onIngested?: (result: BrokerIngestResult, message: BrokerMessage) => void;
  readonly onError?: (
    error: unknown,
    context: { readonly during: 'receive' | 'ingest' | 'delete' | 'visibility' },
  ) => void;
}

/** What one receive did. */
export interface SqsReceiveReport {
  readonly received: number;
  readonly stored: number;
  readonly duplicate: number;
  readonly dead: number;
  /**
   * Messages given back, nothing stored for them: visible again after `retryDelaySeconds` when their ingestion
   * failed for another reason than a store outage (on a FIFO queue, with the rest of the batch after it), or at
   * once (visibility 0) when the receive stopped while it held them through a store outage (its signal, `close`).
   */
  readonly returned: number;
  readonly wakeRelay: boolean;
  /** The failure that stopped the receive, if any (a store outage that outlasted the receive included). */
  readonly error?: unknown;
}

/** A long-polling SQS consumer. */
export interface SqsConsumer {
  /**
   * One `ReceiveMessage` (long poll), stores what came in order, deletes what was stored. Never throws. During a
   * store outage it holds the messages until the store takes them or `signal` aborts (or `close`).
   */
  receive(signal?: AbortSignal): Promise<SqsReceiveReport>;
  /**
   * Receives until `signal` aborts, pausing `errorDelayMs` (default 1000) after a failure, and `idleMs` (default
   * 250) after an empty short poll (`waitTimeSeconds: 0`; a long poll does its own waiting).
   */
  run(
    signal: AbortSignal,
    pauses?: { readonly errorDelayMs?: number; readonly idleMs?: number },
  ): Promise<void>;
  /** Aborts the poll in flight and ends a hold (its messages given back), then releases the client. */
  close(): Promise<void>;
}

/** SQS's longest visibility timeout. */
const MAX_VISIBILITY_SECONDS = 43_200;

/**
 * The local runtime's SQS source: long-polls the queue (`ReceiveMessage`, up to `batchSize` messages, waiting up to
 * `waitTimeSeconds`), stores each message through the broker ingestion in the order received, and deletes each one
 * only after its inbox row (pending or dead) committed (`DeleteMessageBatch`). A body that is not JSON becomes a
 * dead row and is deleted: a poison message never blocks the queue.
 *
 * A store outage (ingestion rejects with core's `StoreUnavailableError`, also as a cause) does not give the message
 * back: every receive counts against the queue's redrive policy (`maxReceiveCount`), so making it visible again
 * each second would send it to the dead-letter queue within seconds of an outage. What was stored so far is
 * deleted; the message and the rest of its batch are held, in order (on a FIFO queue, the order of their groups),
 * and in flight: they get a visibility timeout of `heldVisibilitySeconds` (60 s) at once and again every third of
 * it. The held message is tried again after 1 s, doubling to 30 s (`unavailableRetryMs`), and nothing new is
 * received meanwhile. When the store answers, the batch goes on where it stopped: an outage costs each message one
 * receive. When the receive stops first (`run`'s signal, `close`), the held messages get visibility 0, so they
 * come back at once, in order, to the next consumer (a restart, another replica): their receive is spent already,
 * and leaving them in flight would only delay them (a FIFO group: all of it) by up to `heldVisibilitySeconds`.
 *
 * Any other ingestion failure makes that message visible again after `retryDelaySeconds`
 * (`ChangeMessageVisibilityBatch`); on a FIFO queue the rest of the batch is given back with it untried, so a
 * message group keeps its order.
 */
export function createSqsConsumer(options: SqsConsumerOptions): SqsConsumer {
  const fifo = isFifoQueueUrl(options.queueUrl);
  const batchSize = Math.min(10, Math.max(1, options.batchSize ?? 10));
  const waitTimeSeconds = Math.min(20, Math.max(0, options.waitTimeSeconds ?? 20));
  const retryDelaySeconds = options.retryDelaySeconds ?? 1;
  const firstUnavailablePauseMs = Math.max(1, options.unavailableRetryMs?.first ?? 1000);
  const maxUnavailablePauseMs = Math.max(firstUnavailablePauseMs, options.unavailableRetryMs?.max ?? 30_000);
  const heldVisibilitySeconds = Math.min(
    MAX_VISIBILITY_SECONDS,
    Math.max(2, Math.round(options.heldVisibilitySeconds ?? 60)),
  );
  const aws = lazySdkClient(
    () => import('@aws-sdk/client-sqs'),
    ({ SQSClient }) =>
      new SQSClient(
        sdkClientConfig(
          {
            ...options,
            // A long poll answers after up to `waitTimeSeconds`: the request timeout comes on top of it.
            requestTimeoutMs: waitTimeSeconds * 1000 + (options.requestTimeoutMs ?? 10_000),
          },
          regionOfQueueUrl(options.queueUrl),
        ),
      ),
    options.client,
  );
  const polls = new Set<AbortController>();
  /** Receives in progress: `close` waits for them (a hold gives its messages back first). */
  const receiving = new Set<Promise<SqsReceiveReport>>();
  /** Aborted by `close`: ends a hold through a store outage. */
  const closing = new AbortController();
  const report = (error: unknown, during: 'receive' | 'ingest' | 'delete' | 'visibility') => {
    try {
      options.onError?.(error, { during });
    } catch {
      // A logging hook must not stop the consumer.
    }
  };

  async function receiveOnce(signal?: AbortSignal): Promise<SqsReceiveReport> {
    const counts = { received: 0, stored: 0, duplicate: 0, dead: 0, returned: 0 };
    let wakeRelay = false;
    const done = (error?: unknown): SqsReceiveReport => ({
      ...counts,
      wakeRelay,
      ...(error === undefined ? {} : { error }),
    });
    if (closing.signal.aborted) return done();
    const poll = new AbortController();
    const forward = () => poll.abort();
    signal?.addEventListener('abort', forward, { once: true });
    polls.add(poll);
    let messages: Message[];
    let sqs: SQSClient;
    let commands: typeof import('@aws-sdk/client-sqs');
    try {
      ({ sdk: commands, client: sqs } = await aws.get());
      const answer = await sqs.send(
        new commands.ReceiveMessageCommand({
          QueueUrl: options.queueUrl,
          MaxNumberOfMessages: batchSize,
          WaitTimeSeconds: waitTimeSeconds,
          MessageAttributeNames: ['All'],
          MessageSystemAttributeNames: ['All'],
        }),
        { abortSignal: poll.signal },
      );
      messages = answer.Messages ?? [];
    } catch (error) {
      if (poll.signal.aborted) return done();
      report(error, 'receive');
      return done(error);
    } finally {
      polls.delete(poll);
      signal?.removeEventListener('abort', forward);
    }
    counts.received = messages.length;

    /** Sets the visibility of `batch`; false when the call failed (reported). */
    const setVisibility = async (batch: readonly Message[], seconds: number): Promise<boolean> => {
      if (batch.length === 0) return true;
      try {
        const answer = await sqs.send(
          new commands.ChangeMessageVisibilityBatchCommand({
            QueueUrl: options.queueUrl,
            Entries: batch.map((m, i) => ({
              Id: `v${i}`,
              ReceiptHandle: m.ReceiptHandle,
              VisibilityTimeout: seconds,
            })),
          }),
        );
        if ((answer.Failed ?? []).length > 0) {
          report(
            new Error(
              `ChangeMessageVisibilityBatch failed for ${answer.Failed?.length} messages: ${answer.Failed?.[0]?.Code} ${answer.Failed?.[0]?.Message ?? ''}`.trim(),
            ),
            'visibility',
          );
        }
        return true;
      } catch (error) {
        report(error, 'visibility');
        return false;
      }
    };
    const toDelete: Message[] = [];
    /** Deletes the stored messages not deleted yet; false when the call failed (reported). */
    const deleteStored = async (): Promise<boolean> => {
      const batch = toDelete.splice(0);
      if (batch.length === 0) return true;
      try {
        const answer = await sqs.send(
          new commands.DeleteMessageBatchCommand({
            QueueUrl: options.queueUrl,
            Entries: batch.map((m, i) => ({ Id: `d${i}`, ReceiptHandle: m.ReceiptHandle })),
          }),
        );
        // Not fatal: the rows are stored, so a redelivery only comes back as a duplicate.
        if ((answer.Failed ?? []).length > 0) {
          report(new Error(`DeleteMessageBatch failed for ${answer.Failed?.length} messages`), 'delete');
        }
        return true;
      } catch (error) {
        report(error, 'delete');
        return false;
      }
    };

    const giveBack: Message[] = [];
    let failure: unknown;
    let hold: HeldVisibility | undefined;
    let releasedNow: readonly Message[] = [];
    // The hold's pauses end early on `signal` or `close`; listened to only while a hold lasts.
    const stop = new AbortController();
    const abort = () => stop.abort();
    const signals = [signal, closing.signal].filter((s): s is AbortSignal => s !== undefined);
    let pause = firstUnavailablePauseMs;
    try {
      for (let next = 0; next < messages.length; ) {
        const message = messages[next] as Message;
        if (failure !== undefined && fifo) {
          giveBack.push(...messages.slice(next));
          break;
        }
        const inbox = sqsInboxMessage({
          messageId: message.MessageId ?? '',
          body: message.Body ?? '',
          groupId: message.Attributes?.MessageGroupId,
          attributes: message.MessageAttributes,
        });
        try {
          const result = await options.ingestion.ingest(options.source, inbox);
          counts[result.status] += 1;
          wakeRelay ||= result.wakeRelay;
          toDelete.push(message);
          next += 1;
          // A new outage after a stored message starts with short pauses again.
          pause = firstUnavailablePauseMs;
          hold?.keep(messages.slice(next));
          options.onIngested?.(result, inbox);
        } catch (error) {
          report(error, 'ingest');
          if (!isStoreUnavailable(error)) {
            failure ??= error;
            giveBack.push(message);
            next += 1;
            continue;
          }
          // A store outage: hold this message and the rest of the batch (see createSqsConsumer).
          if (hold === undefined) {
            for (const s of signals) {
              if (s.aborted) stop.abort();
              else s.addEventListener('abort', abort, { once: true });
            }
            hold = new HeldVisibility(heldVisibilitySeconds, setVisibility);
          }
          // What is stored is deleted now, not after the outage (its visibility would run out meanwhile): at the
          // first outage of the batch and at every later one (messages stored between two outages are no longer
          // kept invisible by the hold).
          await deleteStored();
          hold.keep(messages.slice(next));
          if (!stop.signal.aborted) await sleepUnlessAborted(pause, stop.signal);
          if (stop.signal.aborted) {
            failure = error;
            releasedNow = messages.slice(next);
            break;
          }
          pause = Math.min(pause * 2, maxUnavailablePauseMs);
        }
      }
    } finally {
      for (const s of signals) s.removeEventListener('abort', abort);
      await hold?.end();
    }
    counts.returned = giveBack.length + releasedNow.length;
    if (!(await deleteStored())) failure ??= new Error('DeleteMessageBatch failed');
    if (!(await setVisibility(giveBack, retryDelaySeconds)))
      failure ??= new Error('ChangeMessageVisibility failed');
    // Back at once (see createSqsConsumer); when this fails they come back when their held visibility runs out.
    await setVisibility(releasedNow, 0);
    return done(failure);
  }

  function receive(signal?: AbortSignal): Promise<SqsReceiveReport> {
    const running = receiveOnce(signal);
    receiving.add(running);
    void running.finally(() => receiving.delete(running));
    return running;
  }

  return {
    receive,
    async run(signal, pauses = {}) {
      while (!signal.aborted && !closing.signal.aborted) {
        const result = await receive(signal);
        if (signal.aborted) break;
        // A long poll waits by itself; a short one (waitTimeSeconds 0) that found nothing must not spin.
        const wait =
          result.error !== undefined
            ? (pauses.errorDelayMs ?? 1000)
            : result.received === 0 && waitTimeSeconds === 0
              ? (pauses.idleMs ?? 250)
              : 0;
        if (wait === 0) continue;
        await sleepUnlessAborted(wait, signal);
      }
    },
    async close() {
      closing.abort();
      for (const poll of polls) poll.abort();
      // A receive holding messages gives them back (visibility 0) before the client goes.
      await Promise.allSettled([...receiving]);
      await aws.close();
    },
  };
}

/**
 * The messages held through a store outage and the visibility that keeps them in flight: `seconds` when the hold
 * starts and again every third of it (a call that fails is tried again at the next turn, well before it runs out).
 */
class HeldVisibility {
  private messages: readonly Message[] = [];
  private timer: ReturnType<typeof setInterval> | undefined;
  private inFlight: Promise<unknown> = Promise.resolve();
  private readonly seconds: number;
  private readonly extend: (batch: readonly Message[], seconds: number) => Promise<boolean>;

  constructor(seconds: number, extend: (batch: readonly Message[], seconds: number) => Promise<boolean>) {
    this.seconds = seconds;
    this.extend = extend;
  }

  /** Holds `messages` (the ones not stored yet, in order); the first call extends them at once. */
  keep(messages: readonly Message[]): void {
    const first = this.timer === undefined;
    this.messages = messages;
    if (!first || messages.length === 0) return;
    this.renew();
    this.timer = setInterval(() => this.renew(), (this.seconds * 1000) / 3);
  }

  /** Ends the hold once a renewal in flight finished (so it cannot land after the caller's own visibility change). */
  async end(): Promise<void> {
    clearInterval(this.timer);
    this.messages = [];
    await this.inFlight;
  }

  private renew(): void {
    const batch = this.messages;
    if (batch.length === 0) return;
    this.inFlight = this.inFlight.then(() => this.extend(batch, this.seconds));
  }
}
