/**
 * Headers bound to the received request (its body's digests, its range, its preconditions, its hop count) are never
 * stored: QueueBox delivers its own serialisation of the JSON, so a relayed `Content-Digest` would not match the body
 * the destination gets, and a relayed `If-Match` would make the destination answer 412. `Date` and `User-Agent` say
 * when and by what the webhook was sent, and stay (an outside HTTP conformance audit).
 */
import { describe, expect, it } from 'vitest';
import { keptHeaders, normalizeHeaders, storableHeaders } from '../src/index.ts';

const REQUEST_BOUND = [
  'Content-Digest',
  'Repr-Digest',
  'Digest',
  'Content-MD5',
  'Want-Digest',
  'Want-Content-Digest',
  'Want-Repr-Digest',
  'Content-Range',
  'Range',
  'If-Match',
  'If-None-Match',
  'If-Modified-Since',
  'If-Unmodified-Since',
  'If-Range',
  'Max-Forwards',
];

/** A delivery carrying every request-bound header, beside the headers that say when and by what it was sent. */
function aDeliveryWithRequestBoundHeaders(): Record<string, string> {
  return normalizeHeaders({
    ...Object.fromEntries(REQUEST_BOUND.map((name) => [name, 'sha-256=:AAAA:'])),
    Date: 'Mon, 30 Nov 2026 12:00:00 GMT',
    'User-Agent': 'Stripe/1.0',
    'X-Correlation-Id': 'c-1',
  });
}

describe('request-bound headers', () => {
  it('stores none of them, and keeps Date and User-Agent', () => {
    // Prepare
    const headers = aDeliveryWithRequestBoundHeaders();
    // Act
    const stored = storableHeaders(headers, []);
    // Assess
    expect(stored).toEqual({
      date: 'Mon, 30 Nov 2026 12:00:00 GMT',
      'user-agent': 'Stripe/1.0',
      'x-correlation-id': 'c-1',
    });
  });

  it('stores none of them either when a source lists them in keepHeaders', () => {
    // Prepare
    const headers = aDeliveryWithRequestBoundHeaders();
    const keep = keptHeaders({ type: 'http', keepHeaders: [...REQUEST_BOUND, 'Date', 'User-Agent'] });
    // Act
    const stored = storableHeaders(headers, [], keep);
    // Assess
    expect(stored).toEqual({ date: 'Mon, 30 Nov 2026 12:00:00 GMT', 'user-agent': 'Stripe/1.0' });
  });
});
