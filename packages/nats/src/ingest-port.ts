/**
 * What this adapter needs from the inbox: the broker ingestion of `@queuebox/inbox` (`createBrokerIngestion`)
 * fits these shapes as it is. They are restated here, not imported, because adapters depend on core only.
 */
import type { RowId } from '@queuebox/core';

/** One received message, decoded from the transport. */
export interface BrokerMessage {
  readonly body: Uint8Array;
  /** Application headers as text. */
  readonly headers: Readonly<Record<string, string>>;
  /** The `Nats-Msg-Id` header (JetStream's de-duplication id). */
  readonly messageId?: string;
  /** Unused by NATS. */
  readonly type?: string;
  /** Unused by NATS. */
  readonly correlationId?: string;
  /** `stream:sequence`: the idempotency key when neither the source nor `Nats-Msg-Id` gives one. */
  readonly defaultIdempotencyKey?: string;
}

/** What the inbox made of one message; every status means "committed, acknowledge the delivery". */
export interface BrokerIngestResult {
  readonly status: 'stored' | 'duplicate' | 'dead';
  readonly id: RowId;
  readonly reason?: string;
  readonly wakeRelay: boolean;
}

/** Stores one message of a broker source; rejects (StoreUnavailableError and others) when nothing was committed. */
export interface BrokerIngestionPort {
  ingest(sourceName: string, message: BrokerMessage): Promise<BrokerIngestResult>;
}
