import { ConfigError, type JsonValue, parseJsonText } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import type { TransformInput, TransformResult } from '../src/index.ts';
import {
  compileTransform,
  loadJsonata,
  reject,
  runSourceTransform,
  TransformRejectedError,
  TransformTimeoutError,
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

describe('runSourceTransform: results JSON cannot hold exactly, and their size', () => {
  it('rejects what a function returns without a usable JSON payload, naming the problem, and never throws', async () => {
    // Prepare
    const results: Record<string, unknown> = {
      undefined: undefined,
      null: null,
      text: 'x',
      array: [{ payload: 1 }],
      noPayload: {},
      undefinedPayload: { payload: undefined },
      symbol: { payload: Symbol('x') },
      symbolMember: { payload: { s: Symbol('x') } },
      function: { payload: () => 1 },
      functionMember: { payload: { f() {} } },
      bigint: { payload: 10n },
      bigintMember: { payload: { n: [1, 10n] } },
      nan: { payload: { n: Number.NaN } },
      infinity: { payload: [Number.POSITIVE_INFINITY] },
      date: { payload: { d: new Date(0) } },
      map: { payload: { m: new Map([[1, 2]]) } },
      instance: { payload: new (class Order {})() },
      hole: { payload: [1, undefined, 3] },
      nullHeaders: { payload: {}, headers: null },
      arrayHeaders: { payload: {}, headers: ['x'] },
    };
    // Act
    const reasons: Record<string, string> = {};
    for (const [name, result] of Object.entries(results)) {
      const outcome = await runSourceTransform(async () => result as TransformResult, anInput());
      reasons[name] = 'reject' in outcome ? outcome.reject : 'stored';
    }
    // Assess
    const unusable = "the transform's result cannot be stored: ";
    expect(reasons).toEqual({
      undefined: `${unusable}it is not a { payload } object (undefined)`,
      null: `${unusable}it is not a { payload } object (null)`,
      text: `${unusable}it is not a { payload } object (string)`,
      array: `${unusable}it is not a { payload } object (array)`,
      noPayload: `${unusable}it has no payload`,
      undefinedPayload: `${unusable}it has no payload`,
      symbol: `${unusable}its payload holds a symbol, which JSON cannot hold`,
      symbolMember: `${unusable}its payload holds a symbol, which JSON cannot hold`,
      function: `${unusable}its payload holds a function, which JSON cannot hold`,
      functionMember: `${unusable}its payload holds a function, which JSON cannot hold`,
      bigint: `${unusable}its payload holds a BigInt, which JSON cannot hold`,
      bigintMember: `${unusable}its payload holds a BigInt, which JSON cannot hold`,
      nan: `${unusable}its payload holds NaN, which JSON cannot hold`,
      infinity: `${unusable}its payload holds Infinity, which JSON cannot hold`,
      date: `${unusable}its payload holds an object of type Date, which JSON cannot hold exactly (plain objects and arrays only)`,
      map: `${unusable}its payload holds an object of type Map, which JSON cannot hold exactly (plain objects and arrays only)`,
      instance: `${unusable}its payload holds an object of type Order, which JSON cannot hold exactly (plain objects and arrays only)`,
      hole: `${unusable}its payload holds undefined in an array, which JSON cannot hold`,
      nullHeaders: `${unusable}its headers are not an object (null)`,
      arrayHeaders: `${unusable}its headers are not an object (array)`,
    });
  });

  it('keeps plain JSON, kept numbers and null-prototype objects, and leaves out members that are undefined, as JSON does', async () => {
    const payload = parseJsonText('{"id":12345678901234567890,"n":null,"list":[true,0.5,"x"]}');
    const bare = Object.assign(Object.create(null) as Record<string, unknown>, { a: 1 });
    const outcome = await runSourceTransform(
      async () => ({ payload: { payload, bare, gone: undefined } as unknown as JsonValue }),
      anInput(),
    );
    expect('reject' in outcome).toBe(false);
    expect(JSON.stringify('payload' in outcome ? outcome.payload : null)).toBe(
      '{"payload":{"id":12345678901234567890,"n":null,"list":[true,0.5,"x"]},"bare":{"a":1}}',
    );
  });

  it('rejects a payload whose JSON is larger than maxPayloadBytes (default inbox.maxBodyBytes, 1 MiB)', async () => {
    // Prepare
    const of = (bytes: number) => async () => ({ payload: { s: 'é'.repeat(bytes / 2) } });
    // Act
    const small = await runSourceTransform(of(900), anInput(), { maxPayloadBytes: 1000 });
    const large = await runSourceTransform(of(1000), anInput(), { maxPayloadBytes: 1000 });
    const byDefault = await runSourceTransform(of(1_048_576), anInput());
    // Assess
    expect('reject' in small).toBe(false);
    expect(large).toEqual({
      reject:
        "the transform's result is too large: its payload takes 1008 bytes as JSON, more than the 1000 bytes a source accepts (inbox.maxBodyBytes, or the size of the message received when larger)",
    });
    expect(byDefault).toMatchObject({ reject: expect.stringContaining('more than the 1048576 bytes') });
  });

  it('rejects a payload far larger than the limit without writing it out (a shared object referenced 2^40 times)', async () => {
    let wide: unknown = 'x';
    for (let i = 0; i < 40; i++) wide = [wide, wide];
    const outcome = await runSourceTransform(async () => ({ payload: wide as JsonValue }), anInput(), {
      maxPayloadBytes: 1000,
    });
    expect(outcome).toMatchObject({
      reject: expect.stringContaining('its payload takes more than the 1000 bytes'),
    });
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

  it('throws TransformTimeoutError for a function still running at timeoutMs (default 1000 ms), and aborts its signal', async () => {
    // Prepare
    let signal: AbortSignal | undefined;
    const functions = {
      hangs: (_input: TransformInput, context: { signal: AbortSignal }) => {
        signal = context.signal;
        return new Promise<TransformResult>(() => {});
      },
    };
    const limited = await compileTransform({ function: 'hangs' }, { functions, timeoutMs: 50 }, 'p');
    const byDefault = await compileTransform({ function: 'hangs' }, { functions }, 'p');
    // Act
    const started = Date.now();
    const outcome = await limited(anInput()).catch((error: unknown) => error);
    const defaultOutcome = await byDefault(anInput()).catch((error: unknown) => error);
    // Assess: not a rejection (which is final): out of time may be the load's doing (see transform.ts).
    expect(outcome).toBeInstanceOf(TransformTimeoutError);
    expect((outcome as TransformTimeoutError).context).toEqual({ timeoutMs: 50 });
    expect((defaultOutcome as TransformTimeoutError).context).toEqual({ timeoutMs: 1000 });
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(signal?.aborted).toBe(true);
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

  it('cuts an expression short at timeoutMs (default 1000 ms) with TransformTimeoutError', async () => {
    // Prepare: a quadratic expression (3.8 s over 1500 lines on the audit's machine) and one that never returns.
    const quadratic = await compileTransform(
      { jsonata: '{"lines": $map(lines, function($l){ {"same": $count(lines[sku = $l.sku])} })}' },
      { timeoutMs: 100 },
      'p',
    );
    const endless = await compileTransform({ jsonata: '($f := function($n){ $f($n + 1) }; $f(0))' }, {}, 'p');
    const lines = Array.from({ length: 1500 }, (_, i) => ({ sku: `s${i % 50}` }));
    // Act
    const started = Date.now();
    const cut = await quadratic(anInput({ payload: { lines } })).catch((error: unknown) => error);
    const never = await endless(anInput()).catch((error: unknown) => error);
    // Assess
    expect((cut as TransformTimeoutError).context).toEqual({ timeoutMs: 100 });
    expect((never as TransformTimeoutError).context).toEqual({ timeoutMs: 1000 });
    expect(cut).toBeInstanceOf(TransformTimeoutError);
    expect(Date.now() - started).toBeLessThan(10_000);
  });

  it('refuses an expression that does not compile with a ConfigError', async () => {
    await expect(compileTransform({ jsonata: '{"a": ' }, {}, 'sources.x.transform')).rejects.toThrow(
      ConfigError,
    );
  });
});
