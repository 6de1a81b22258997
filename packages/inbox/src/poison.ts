import { createHash } from 'node:crypto';
import { CONFIG_DEFAULTS } from '@queuebox/core';

/**
 * When a broker message whose ingestion keeps failing for a reason other than a database outage (a transform function
 * that throws on it, a value the database refuses) becomes a dead row: once it has failed `failures` times and its
 * first failure is at least `ms` old. Both must be reached, so a transform whose own dependency is down for a minute
 * does not turn a minute of messages into dead rows, and a message that fails at once on every try still gets a few
 * of them.
 */
export interface PoisonLimits {
  readonly failures: number;
  readonly ms: number;
}

/** The limits of a source: its `deadAfterFailures` and `deadAfterMs`, else the defaults (10 failures over 5 minutes). */
export function poisonLimits(source: {
  readonly deadAfterFailures?: number;
  readonly deadAfterMs?: number;
}): PoisonLimits {
  return {
    failures: source.deadAfterFailures ?? CONFIG_DEFAULTS.source.deadAfterFailures,
    ms: source.deadAfterMs ?? CONFIG_DEFAULTS.source.deadAfterMs,
  };
}

/** One message's failures so far. */
export interface FailureRecord {
  /** Failures counted, this one included. */
  readonly count: number;
  /** When the first of them happened (the clock's milliseconds). */
  readonly firstAt: number;
  /** Whether the limits are reached: the message is to be stored as a dead row now. */
  readonly exhausted: boolean;
}

/**
 * Failures of broker messages, counted in this process by message (see {@link failureKey}), so that one message the
 * ingestion can never store does not hold up its partition, queue or consumer for ever. A broker redelivers a
 * failed message to whichever consumer it likes: a message is counted only by the processes that tried it, and a
 * restart (or a new Lambda container) starts its count again, which only makes the dead row come later. At most
 * `capacity` messages are tracked, by the SHA-256 of their key (so a long key costs no more); past that the one
 * whose last failure is the oldest is forgotten.
 */
export interface FailureTracker {
  /** Counts one failure of the message `key` at `now`, and answers its record against `limits`. */
  fail(key: string, now: number, limits: PoisonLimits): FailureRecord;
  /** Forgets the message `key` (it was stored, or stored as a dead row). */
  forget(key: string): void;
  /** Messages tracked now. */
  readonly size: number;
}

/**
 * Messages a tracker keeps at most (about 15 MB): more than any consumer holds in flight at once (an AMQP prefetch is
 * at most 65,535), so messages failing in rotation are not forgotten before they fail again.
 */
export const FAILURE_TRACKER_CAPACITY = 100_000;

const digest = (key: string): string => createHash('sha256').update(key).digest('base64');

export function createFailureTracker(capacity = FAILURE_TRACKER_CAPACITY): FailureTracker {
  const records = new Map<string, { count: number; firstAt: number }>();
  return {
    fail(message, now, limits) {
      const key = digest(message);
      const known = records.get(key);
      const record = known ?? { count: 0, firstAt: now };
      record.count += 1;
      // Kept in the order of their last failures: the first entry is the one that failed longest ago.
      if (known !== undefined) records.delete(key);
      else if (records.size >= capacity) {
        const oldest = records.keys().next();
        if (!oldest.done) records.delete(oldest.value);
      }
      records.set(key, record);
      // A clock stepped back (now before firstAt) counts as time passed, as core's intervalPassed does.
      const elapsed = now - record.firstAt;
      const exhausted = record.count >= limits.failures && (elapsed >= limits.ms || elapsed < 0);
      return { count: record.count, firstAt: record.firstAt, exhausted };
    },
    forget(message) {
      records.delete(digest(message));
    },
    get size() {
      return records.size;
    },
  };
}

/**
 * What identifies a message across its redeliveries: its source and idempotency key, or, for a key drawn at random
 * for each delivery (an AMQP message without a `message-id`), the SHA-256 of its body.
 */
export function failureKey(source: string, idempotencyKey: string, body: Uint8Array): string {
  if (!idempotencyKey.startsWith('random:')) return `${source}\u0000key:${idempotencyKey}`;
  return `${source}\u0000body:${createHash('sha256').update(body).digest('hex')}`;
}
