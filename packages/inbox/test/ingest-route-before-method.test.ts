/**
 * The ingestion looks the route up before the method: a path no source answers at is 404 whatever the method, and
 * only a source's path answers 405 with `Allow: POST` (RFC 9110 §15.5.6: a 405 names the methods the target
 * supports). Both the local server and inbox-http on AWS answer through it. Nothing reaches the store.
 */
import type { InboxStore } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import { createIngestion } from '../src/index.ts';
import { anEvent, aStripeRequest, clock, sources, transforms } from './ingest-fixtures.ts';

/** A store no 404 or 405 may reach. */
const untouchable = new Proxy({} as InboxStore, {
  get: (_, name) => () => {
    throw new Error(`the store was asked for ${String(name)}`);
  },
});

function ingestion() {
  return createIngestion({ store: untouchable, sources, transforms, inbox: { basePath: '/inbox' }, clock });
}

describe('the route before the method', () => {
  it('answers 404 unknown_source, without Allow, to any method at a path no source answers at', async () => {
    // Prepare
    const service = ingestion();
    // Act
    const answers = await Promise.all(
      ['GET', 'HEAD', 'PUT', 'OPTIONS'].map((method) =>
        service.handle({ ...aStripeRequest(anEvent()), method, path: '/inbox/nope' }),
      ),
    );
    // Assess
    for (const answer of answers) {
      expect([answer.status, answer.body.error, answer.outcome]).toEqual([
        404,
        'unknown_source',
        'unknown_source',
      ]);
      expect(answer.headers.allow).toBeUndefined();
    }
  });

  it("answers 405 with Allow: POST to another method at a source's path", async () => {
    // Act
    const answer = await ingestion().handle({
      ...aStripeRequest(anEvent()),
      method: 'GET',
      path: '/inbox/stripe',
    });
    // Assess
    expect([answer.status, answer.body.error, answer.outcome]).toEqual([
      405,
      'method_not_allowed',
      'method_not_allowed',
    ]);
    expect(answer.headers.allow).toBe('POST');
  });

  it('matches a path whose unreserved characters came percent-encoded, and nothing else decoded (both shells)', async () => {
    // Act: `%73` is `s`; `%2F` is `/`, which is not unreserved, so `stripe%2Fx` is no source's path
    const [encoded, slash, dots] = await Promise.all(
      ['/inbox/%73tripe', '/inbox/stripe%2Fx', '/inbox/x/%2e%2e/stripe'].map((path) =>
        ingestion().handle({ ...aStripeRequest(anEvent()), method: 'GET', path }),
      ),
    );
    // Assess: the source's 405 for the first, 404 for the others
    expect(encoded?.status).toBe(405);
    expect(slash?.status).toBe(404);
    expect(dots?.status).toBe(404);
  });
});
