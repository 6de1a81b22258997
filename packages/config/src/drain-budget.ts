import { HTTP_TIMEOUT_DEFAULT_MS } from './schema/destinations.ts';

// The claim lease a destination's requests need. The configuration cannot import the outbox (it depends only on
// core), so what it reads of a destination is repeated here, and packages/local/test/config-drift.test.ts compares
// it with packages/outbox's `requestTimeoutOf` on every run.

/**
 * What a claim lease must leave beside the longest request: the outbox poller's settle reserve (1 s by default),
 * twice, as the poller needs it before it bounds a batch by its lease (`leaseBounds` in poller.ts).
 */
export const LEASE_REQUEST_MARGIN_MS = 2_000;

/**
 * The shortest claim lease (`outbox.claimTimeoutMs`) for destinations whose longest request is `longestRequestMs`:
 * the poller ends every batch with its lease (a row whose timeout no longer fits is released untried), so a lease
 * needs room for one request and its settle. Leases are never renewed: a request running past its lease would let
 * another drain claim and deliver the row again.
 */
export function minimumLeaseMs(longestRequestMs: number): number {
  return longestRequestMs + LEASE_REQUEST_MARGIN_MS;
}

/**
 * How long a publisher of a destination without `timeoutMs` other than http waits at most for one publish: the
 * RabbitMQ confirm, the NATS JetStream ack, a Kafka produce or an AWS call all wait about 10 s by default.
 */
export const PUBLISH_WAIT_DEFAULT_MS = 10_000;

/**
 * The longest one request of a destination can hold its row, as the claim lease must allow for it: its
 * `timeoutMs`, else 15 s for http and {@link PUBLISH_WAIT_DEFAULT_MS} for the others (whose publishers bound their own
 * waits, and which packages/outbox's `requestTimeoutOf` counts as 0: the drain does not size itself by them).
 */
export function leaseRequestMs(destination: {
  readonly type: string;
  readonly timeoutMs?: number | undefined;
}): number {
  return (
    destination.timeoutMs ?? (destination.type === 'http' ? HTTP_TIMEOUT_DEFAULT_MS : PUBLISH_WAIT_DEFAULT_MS)
  );
}
