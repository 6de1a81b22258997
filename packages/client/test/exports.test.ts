/**
 * What @queuebox/client exports for applications to handle errors: the very classes the client's code throws, so
 * `instanceof` works in an application that gets the client from the tarball, where core is bundled inside the
 * client and cannot be imported by the application itself.
 */
import * as core from '@queuebox/core';
import * as inbox from '@queuebox/inbox';
import { describe, expect, expectTypeOf, it } from 'vitest';
import * as client from '../src/index.ts';

describe('the error classes of @queuebox/client', () => {
  it.each([
    ['QueueBoxError', client.QueueBoxError, core.QueueBoxError],
    ['StoreError', client.StoreError, core.StoreError],
    ['StoreUnavailableError', client.StoreUnavailableError, core.StoreUnavailableError],
    ['ConfigError', client.ConfigError, core.ConfigError],
  ])('re-exports core %s as the same class', (_name, exported, original) => {
    expect(exported).toBeDefined();
    expect(exported).toBe(original);
  });

  it('re-exports the pull worker and its ClaimLostError as the inbox package defines them', () => {
    expect(client.ClaimLostError).toBe(inbox.ClaimLostError);
    expect(client.createPullWorker).toBe(inbox.createPullWorker);
    expect(client.MAX_CLAIM_ROWS).toBe(inbox.MAX_CLAIM_ROWS);
    expect(client.MAX_GIVEN_UP_PER_CLAIM).toBe(inbox.MAX_GIVEN_UP_PER_CLAIM);
  });

  it("has the pull types @queuebox/inbox has (both re-export core's; checked by tsc)", () => {
    // From core, so the client's declarations need not load the inbox's (see src/pull.ts).
    expectTypeOf<client.PullWorker>().toEqualTypeOf<inbox.PullWorker>();
    expectTypeOf<client.PullWorkerDeps>().toEqualTypeOf<inbox.PullWorkerDeps>();
    expectTypeOf<client.ClaimedInboxRow>().toEqualTypeOf<inbox.ClaimedInboxRow>();
    expectTypeOf<client.RetryRow>().toEqualTypeOf<inbox.RetryRow>();
    expectTypeOf<client.RetryOutcome>().toEqualTypeOf<inbox.RetryOutcome>();
    expectTypeOf<InstanceType<typeof client.ClaimLostError>>().toEqualTypeOf<inbox.ClaimLostError>();
  });

  it('lets an application tell the errors apart with instanceof', async () => {
    // A schema name the client refuses before touching any database: a ConfigError, which is a QueueBoxError.
    const error = await client
      .openPullWorker({ url: 'postgres://127.0.0.1:1/none', source: 'invoices', schema: 'bad schema' })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(client.ConfigError);
    expect(error).toBeInstanceOf(client.QueueBoxError);
    expect(error).not.toBeInstanceOf(client.StoreError);
    const lost = new client.ClaimLostError('1', 'invoices', 'markProcessed');
    expect(lost).toBeInstanceOf(client.QueueBoxError);
    expect(lost).toBeInstanceOf(inbox.ClaimLostError);
    expect(new client.InvalidMessageError([])).toBeInstanceOf(client.QueueBoxError);
  });
});
