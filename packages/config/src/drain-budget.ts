import { HTTP_TIMEOUT_DEFAULT_MS } from './schema/destinations.ts';

// A destination's longest request, as packages/outbox reads it (`requestTimeoutOf` in delivery.ts), and the claim
// lease it needs. The configuration cannot import the outbox (it depends only on core), so the rule is repeated
// here, and packages/local/test/config-drift.test.ts compares both on every run.

/**
 * The longest a destination lets one request take: its `timeoutMs`, else the HTTP publisher's default for `http`;
 * 0 for a destination without one (a broker's publisher bounds its own waits).
 */
export function destinationRequestTimeoutMs(destination: {
  readonly type: string;
  readonly timeoutMs?: number | undefined;
}): number {
  return destination.timeoutMs ?? (destination.type === 'http' ? HTTP_TIMEOUT_DEFAULT_MS : 0);
}

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
