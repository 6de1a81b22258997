import { ConfigError, QueueBoxError } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import {
  chainTransforms,
  checkTransforms,
  createTransformCompiler,
  createTransformRegistry,
  reject,
  type TransformInput,
  TransformRejectedError,
} from '../src/transforms.ts';

const anInput = (over: Partial<TransformInput> = {}): TransformInput => ({
  payload: { order: { id: 7, total: 12.5, lines: [{ sku: 'a' }, { sku: 'b' }] } },
  headers: { 'X-Trace': 't-1' },
  topic: 'orders.created',
  key: 'order-7',
  id: '42',
  messageId: '0123456789abcdef0123456789abcdef-42',
  ...over,
});

describe('JSONata transforms', () => {
  it('reshapes the payload, with $topic, $key, $id, $messageId and $headers bound', async () => {
    // Prepare
    const transform = createTransformCompiler().compile({
      jsonata:
        '{ "orderId": order.id, "skus": order.lines.sku, "topic": $topic, "key": $key, "id": $id, "messageId": $messageId, "trace": $headers."X-Trace" }',
    });
    // Act
    const outcome = await transform.apply(anInput());
    // Assess
    expect(outcome).toEqual({
      ok: true,
      payload: {
        orderId: 7,
        skus: ['a', 'b'],
        topic: 'orders.created',
        key: 'order-7',
        id: '42',
        messageId: '0123456789abcdef0123456789abcdef-42',
        trace: 't-1',
      },
      headers: { 'X-Trace': 't-1' },
    });
  });

  it('returns plain JSON: a one-element sequence stays a value, arrays lose JSONata fields', async () => {
    const compiler = createTransformCompiler();
    const single = await compiler.compile({ jsonata: 'order.lines[0].sku' }).apply(anInput());
    const many = await compiler.compile({ jsonata: 'order.lines.sku' }).apply(anInput());
    expect(single).toMatchObject({ ok: true, payload: 'a' });
    expect(many.ok && Object.keys(many.payload as object)).toEqual(['0', '1']);
  });

  it('rejects through $reject(reason)', async () => {
    // Prepare
    const transform = createTransformCompiler().compile({
      jsonata: 'order.total > 10 ? $reject("too expensive") : order',
    });
    // Act
    const outcome = await transform.apply(anInput());
    // Assess
    expect(outcome).toEqual({ ok: false, reason: 'jsonata rejected: too expensive' });
  });

  it('treats $error(), a runtime error and an empty result as rejections', async () => {
    const compiler = createTransformCompiler();
    const thrown = await compiler.compile({ jsonata: '$error("nope")' }).apply(anInput());
    const typeError = await compiler.compile({ jsonata: 'order.id + "x"' }).apply(anInput());
    const empty = await compiler.compile({ jsonata: 'order.missing' }).apply(anInput());
    expect(thrown).toEqual({ ok: false, reason: 'jsonata failed: D3137 nope at 7' });
    expect(typeError.ok).toBe(false);
    expect(typeError.ok === false && typeError.reason).toMatch(/^jsonata failed: T2002 The right side/);
    expect(empty).toEqual({ ok: false, reason: 'jsonata: the expression produced no value' });
  });

  it('stops a CPU-bound expression at the timeout instead of hanging', async () => {
    // Prepare: an endless tail-recursive loop never yields to a timer.
    const transform = createTransformCompiler({ timeoutMs: 50 }).compile({
      jsonata: '($loop := function($n) { $loop($n + 1) }; $loop(0))',
    });
    // Act
    const outcome = await transform.apply(anInput());
    // Assess
    expect(outcome).toEqual({ ok: false, reason: 'jsonata: transform timed out after 50 ms' });
  });

  it('refuses a syntax error at compile time with the path', () => {
    let error: unknown;
    try {
      createTransformCompiler().compile({ jsonata: '{ "a": ' }, 'routes[0].transform');
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).issues[0]?.path).toBe('routes[0].transform.jsonata');
    expect((error as ConfigError).issues[0]?.message).toMatch(/^JSONata syntax error/);
  });
});

describe('function transforms', () => {
  it('return a new payload and add or replace headers (names without case)', async () => {
    // Prepare
    const registry = createTransformRegistry({
      enrich: (input) => ({
        payload: { wrapped: input.payload, id: input.id },
        headers: { 'x-trace': 't-2', 'X-Added': 'yes' },
      }),
    });
    // Act
    const outcome = await createTransformCompiler({ registry })
      .compile({ function: 'enrich' })
      .apply(anInput());
    // Assess
    expect(outcome).toEqual({
      ok: true,
      payload: { wrapped: anInput().payload, id: '42' },
      headers: { 'x-trace': 't-2', 'X-Added': 'yes' },
    });
  });

  it('reject with reject(), TransformRejectedError, a throw, or a bad result', async () => {
    // Prepare
    const registry = createTransformRegistry()
      .register('helper', () => reject('no customer'))
      .register('error', async () => {
        throw new TransformRejectedError('bad currency');
      })
      .register('bug', () => {
        throw new TypeError('cannot read x of undefined');
      })
      .register('nothing', () => undefined as never);
    const compiler = createTransformCompiler({ registry });
    // Act
    const outcomes = await Promise.all(
      ['helper', 'error', 'bug', 'nothing'].map((name) =>
        compiler.compile({ function: name }).apply(anInput()),
      ),
    );
    // Assess
    expect(outcomes).toEqual([
      { ok: false, reason: 'function:helper rejected: no customer' },
      { ok: false, reason: 'function:error rejected: bad currency' },
      { ok: false, reason: 'function:bug failed: cannot read x of undefined' },
      { ok: false, reason: 'function:nothing returned no { payload }' },
    ]);
  });

  it('reject headers whose value is not a string, naming the header and the type, never the value', async () => {
    // Prepare: what code can return although the type says string
    const odd: Record<string, unknown> = {
      number: 7,
      nan: Number.NaN,
      null: null,
      undefined: undefined,
      object: { secret: 's3cret' },
      array: ['a'],
      boolean: true,
    };
    const registry = createTransformRegistry({
      odd: (input) => ({
        payload: input.payload,
        headers: { 'x-ok': 'yes', 'x-odd': odd[String(input.topic)] as never },
      }),
    });
    const transform = createTransformCompiler({ registry }).compile({ function: 'odd' });
    // Act
    const outcomes = await Promise.all(Object.keys(odd).map((topic) => transform.apply(anInput({ topic }))));
    // Assess
    expect(outcomes.map((o) => (o.ok ? 'ok' : o.reason))).toEqual(
      ['number', 'number', 'null', 'undefined', 'object', 'an array', 'boolean'].map(
        (type) => `function:odd returned the header "x-odd" with a value that is not a string (${type})`,
      ),
    );
  });

  it('time out as a rejection and see their signal aborted', async () => {
    // Prepare
    let aborted = false;
    const registry = createTransformRegistry({
      slow: (_input, { signal }) =>
        new Promise((resolve) => {
          signal.addEventListener('abort', () => {
            aborted = true;
            resolve({ payload: 'too late' });
          });
        }),
    });
    // Act
    const outcome = await createTransformCompiler({ registry, timeoutMs: 30 })
      .compile({ function: 'slow' })
      .apply(anInput());
    // Assess
    expect(outcome).toEqual({ ok: false, reason: 'function:slow: transform timed out after 30 ms' });
    expect(aborted).toBe(true);
  });

  it('refuse an unknown name at compile time, naming the registered ones', () => {
    const registry = createTransformRegistry({ known: (i) => ({ payload: i.payload }) });
    let error: unknown;
    try {
      createTransformCompiler({ registry }).compile(
        { function: 'unknown' },
        'destinations.billing.transform',
      );
    } catch (e) {
      error = e;
    }
    expect((error as ConfigError).issues).toEqual([
      {
        path: 'destinations.billing.transform.function',
        message: 'no transform function named "unknown" is registered (registered: known)',
      },
    ]);
  });

  it('cannot be registered twice under one name', () => {
    const registry = createTransformRegistry({ a: (i) => ({ payload: i.payload }) });
    expect(() => registry.register('a', (i) => ({ payload: i.payload }))).toThrow(QueueBoxError);
  });
});

describe('chainTransforms', () => {
  it('runs the route transform, then the destination transform, on its output', async () => {
    // Prepare
    const registry = createTransformRegistry({
      addHeader: (i) => ({ payload: i.payload, headers: { 'X-Step': 'route' } }),
    });
    const compiler = createTransformCompiler({ registry });
    const route = compiler.compile({ jsonata: '{ "total": order.total }' });
    const destination = compiler.compile({ function: 'addHeader' });
    const last = compiler.compile({ jsonata: '{ "cents": total * 100, "step": $headers."X-Step" }' });
    // Act
    const outcome = await chainTransforms([route, destination, last])?.apply(anInput());
    // Assess
    expect(outcome).toEqual({
      ok: true,
      payload: { cents: 1250, step: 'route' },
      headers: { 'X-Trace': 't-1', 'X-Step': 'route' },
    });
  });

  it('stops at the first rejection', async () => {
    const registry = createTransformRegistry({
      never: () => {
        throw new Error('must not run');
      },
    });
    const compiler = createTransformCompiler({ registry });
    const chain = chainTransforms([
      compiler.compile({ jsonata: '$reject("first")' }),
      compiler.compile({ function: 'never' }),
    ]);
    expect(await chain?.apply(anInput())).toEqual({ ok: false, reason: 'jsonata rejected: first' });
  });

  it('is undefined for no transforms', () => {
    expect(chainTransforms([])).toBeUndefined();
  });
});

describe('checkTransforms', () => {
  it('lists every problem of routes and destinations with their paths', () => {
    // Prepare
    const compiler = createTransformCompiler({ registry: createTransformRegistry() });
    // Act
    const issues = checkTransforms(
      compiler,
      [
        { match: 'a.#', destination: 'x', transform: { jsonata: 'payload' } },
        { match: 'b.#', destination: 'x', transform: { function: 'missing' } },
      ],
      { x: { type: 'http', transform: { jsonata: '(' } } },
    );
    // Assess
    expect(issues.map((i) => i.path)).toEqual([
      'routes[1].transform.function',
      'destinations.x.transform.jsonata',
    ]);
  });
});
