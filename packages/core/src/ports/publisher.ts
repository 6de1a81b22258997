import type { Headers, JsonValue } from '../messages.ts';

/** A message as a publisher sends it: the routed, transformed outbox row. */
export interface OutgoingMessage {
  /**
   * The message id, which publishers send as the idempotency / message id (`Idempotency-Key`, `webhook-id`, broker
   * `message-id`, `Nats-Msg-Id`, SQS FIFO `MessageDeduplicationId`). For an outbox row it is `outboxMessageId(row
   * id, install id)`: the same on every attempt of the row, and unique across databases and schemas — not the bare
   * row id, which another schema also has.
   */
  readonly id: string;
  readonly topic: string;
  readonly key: string | null;
  readonly payload: JsonValue;
  readonly headers: Headers;
  /** Attempts already made before this one. */
  readonly attempt: number;
}

/** What became of one publish. */
export type PublishOutcome =
  | { readonly kind: 'sent' }
  | {
      readonly kind: 'retry';
      readonly error: string;
      /**
       * The destination's `Retry-After` for a try that was made; for an `unstarted` one, how long before the message
       * is worth trying again (busy connections, a destination's pause).
       */
      readonly retryAfterMs?: number;
      /** Nothing was sent: the publisher did not start the request (see `PublishOptions.startBy`). */
      readonly unstarted?: boolean;
    }
  /**
   * The destination refused this message in a way no try again will change (a header it cannot carry, a subject it
   * cannot take). The poller still retries it until the row's attempts run out, as any failure (the specification:
   * a row goes dead only when no attempt remains, no route matches or a transform dead-letters it); the kind keeps
   * what the publisher knew, for its own callers and tests.
   */
  | { readonly kind: 'dead'; readonly error: string };

/** How one publish may run. */
export interface PublishOptions {
  /**
   * Latest time (epoch milliseconds) at which the request may still be started: a publisher that only gets to start
   * it later (it waited for a free connection) answers `{ kind: 'retry', unstarted: true }` without sending, rather
   * than start a request the caller's deadline would cut (a cut request may have reached the destination, and is
   * sent again). Publishers that cannot tell may ignore it.
   */
  readonly startBy?: number;
}

/** Sends messages to one configured destination. */
export interface Publisher {
  publish(message: OutgoingMessage, signal?: AbortSignal, options?: PublishOptions): Promise<PublishOutcome>;
  close(): Promise<void>;
}
