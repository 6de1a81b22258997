import type { Headers, JsonValue, RowId } from '../messages.ts';

/** A message as a publisher sends it: the routed, transformed outbox row. */
export interface OutgoingMessage {
  /** The outbox row id; publishers use it as the idempotency / message id. */
  readonly id: RowId;
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
  | { readonly kind: 'retry'; readonly error: string; readonly retryAfterMs?: number }
  | { readonly kind: 'dead'; readonly error: string };

/** Sends messages to one configured destination. */
export interface Publisher {
  publish(message: OutgoingMessage, signal?: AbortSignal): Promise<PublishOutcome>;
  close(): Promise<void>;
}
