import { ConfigError, parseJsonText } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import type { TransformInput, TransformResult } from '../src/index.ts';
import {
  compileTransform,
  loadJsonata,
  reject,
  runSourceTransform,
  TransformRejectedError,
} from '../src/index.ts';

const anInput = (overrides: Partial<TransformInput> = {}): TransformInput => ({
  source: 'stripe',
  payload: { id: 'evt_1', type: 'invoice.paid', amount: 1200 },
  headers: { 'content-type': 'application/json' },
  eventType: 'invoice.paid',
  idempotencyKey: 'evt_1',
  ...overrides,
});

describe('runSourceTransform', () => {
  it("rejects a result the database could not store: the payload's checks, and headers that are not storable text", async () => {
    const results: Record<string, TransformResult> = {
      nul: { payload: { ref: 'a\u0000b' } },
      surrogate: { payload: { 'k\uD83D': 1 } },
      huge: { payload: parseJsonText('{"n":1e1000000}') },
      notText: { payload: {}, headers: { 'x-n': 5 as unknown as string } },
      nulHeader: { payload: {}, headers: { 'x-ref': 'a\u0000' } },
    };
    const reasons: Record<string, string> = {};
    for (const [name, result] of Object.entries(results)) {
      const outcome = await runSourceTransform(async () => result, anInput());
      reasons[name] = 'reject' in outcome ? outcome.reject : 'stored';
    }

    expect(reasons).toEqual({
      nul: "the transform's result cannot be stored: its payload holds a U+0000 character, which the database cannot store",
      surrogate:
        "the transform's result cannot be stored: its payload holds an unpaired UTF-16 surrogate (\\uD800–\\uDFFF)",
      huge: expect.stringContaining(
        "the transform's result cannot be stored: its payload holds a number beyond",
      ),
      notText: 'the transform\'s result cannot be stored: its header "x-n" is not text',
      nulHeader: expect.stringContaining('its header "x-ref" holds a U+0000 character'),
    });
    const fine = await runSourceTransform(
      async () => ({ payload: { ok: 1 }, headers: { 'X-A': 'b' } }),
      anInput(),
    );
    expect(fine).toEqual({ payload: { ok: 1 }, headers: { 'content-type': 'application/json', 'x-a': 'b' } });
  });
});

describe('function transforms', () => {
  it('runs a registered function and returns its payload and headers', async () => {
    // Prepare
    const transform = await compileTransform(
      { function: 'cents' },
      {
        functions: {
          cents: ({ payload }) => ({
            payload: { amountCents: (payload as { amount: number }).amount },
            headers: { 'x-unit': 'cents' },
          }),
        },
      },
      'sources.stripe.transform',
    );
    // Act
    const outcome = await transform(anInput());
    // Assess
    expect(outcome).toEqual({ payload: { amountCents: 1200 }, headers: { 'x-unit': 'cents' } });
  });

  it('turns reject() and a thrown TransformRejectedError into a rejection, as the outbox does', async () => {
    const functions = {
      rejects: () => reject('not for us'),
      throws: async () => {
        throw new TransformRejectedError('unsupported event');
      },
    };
    const rejects = await compileTransform({ function: 'rejects' }, { functions }, 'p');
    const throws = await compileTransform({ function: 'throws' }, { functions }, 'p');
    expect(await rejects(anInput())).toEqual({ reject: 'not for us' });
    expect(await throws(anInput())).toEqual({ reject: 'unsupported event' });
  });

  it('lets any other error escape (a bug, not a rejection)', async () => {
    const transform = await compileTransform(
      { function: 'buggy' },
      {
        functions: {
          buggy: () => {
            throw new TypeError('boom');
          },
        },
      },
      'p',
    );
    await expect(transform(anInput())).rejects.toThrow(TypeError);
  });

  it('refuses an unknown function name with a ConfigError naming the path', async () => {
    await expect(compileTransform({ function: 'missing' }, {}, 'sources.x.transform')).rejects.toThrow(
      ConfigError,
    );
    await expect(compileTransform({ function: 'toString' }, { functions: {} }, 'p')).rejects.toThrow(
      /no transform function named "toString"/,
    );
  });
});

const jsonata = await loadJsonata().catch(() => undefined);
if (jsonata === undefined) {
  console.warn('transform.test.ts: skipping the JSONata tests: the jsonata package is not installed');
}

describe.runIf(jsonata !== undefined)('JSONata transforms', () => {
  it('evaluates over the payload with $headers, $source and $eventType bound', async () => {
    const transform = await compileTransform(
      {
        jsonata:
          '{"id": id, "cents": amount, "from": $source, "kind": $eventType, "ct": $headers."content-type"}',
      },
      {},
      'p',
    );
    expect(await transform(anInput())).toEqual({
      payload: { id: 'evt_1', cents: 1200, from: 'stripe', kind: 'invoice.paid', ct: 'application/json' },
    });
  });

  it('rejects through $reject(reason), through an undefined result and through an evaluation error', async () => {
    const reject = await compileTransform({ jsonata: 'amount > 1000 ? $reject("too large") : $' }, {}, 'p');
    const nothing = await compileTransform({ jsonata: 'missing.field' }, {}, 'p');
    const failing = await compileTransform({ jsonata: 'type + 1' }, {}, 'p');
    expect(await reject(anInput())).toEqual({ reject: 'too large' });
    expect(await reject(anInput({ payload: { amount: 5 } }))).toEqual({ payload: { amount: 5 } });
    expect(await nothing(anInput())).toEqual({ reject: 'the transform produced no payload' });
    expect(await failing(anInput())).toMatchObject({
      reject: expect.stringMatching(/^the transform failed: /),
    });
  });

  it('refuses an expression that does not compile with a ConfigError', async () => {
    await expect(compileTransform({ jsonata: '{"a": ' }, {}, 'sources.x.transform')).rejects.toThrow(
      ConfigError,
    );
  });
});
