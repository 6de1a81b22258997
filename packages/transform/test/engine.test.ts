import { parseJsonText } from '@queuebox/core';
import jsonata from 'jsonata';
import { describe, expect, it } from 'vitest';
import {
  createJsonataEngine,
  DEFAULT_REJECT_REASON,
  describeError,
  JSONATA_TURN_WAIT_TIMEOUTS,
  reject,
  runTransformFunction,
  TransformRejectedError,
} from '../src/index.ts';

const aPayload = () => ({ order: { id: 7, total: 12.5, lines: [{ sku: 'a' }, { sku: 'b' }] } });

describe('createJsonataEngine', () => {
  it('evaluates over the payload with the bindings and returns plain JSON', async () => {
    // Prepare
    const engine = createJsonataEngine({ compile: jsonata });
    const expression = engine.parse('{ "id": order.id, "skus": order.lines.sku, "from": $source }');
    // Act
    const run = await engine.evaluate(expression, aPayload(), { source: 'stripe' });
    // Assess
    expect(run).toEqual({ ok: true, value: { id: 7, skus: ['a', 'b'], from: 'stripe' } });
    expect(run.ok && Object.keys((run.value as { skus: object }).skus)).toEqual(['0', '1']);
  });

  it('keeps numbers a double cannot hold, which the payload carries as their source text, with every digit', async () => {
    const engine = createJsonataEngine({ compile: jsonata });
    const payload = parseJsonText('{"big":12345678901234567890,"n":1e400,"tiny":1e-400,"plain":1.5}');

    const run = await engine.evaluate(engine.parse('$merge([$, {"added": true}])'), payload, {});

    expect(run.ok).toBe(true);
    expect(run.ok && JSON.stringify(run.value)).toBe(
      '{"big":12345678901234567890,"n":1e400,"tiny":1e-400,"plain":1.5,"added":true}',
    );
  });

  it('keeps every digit of every number through the transform operator (~> | … |), which clones its whole input', async () => {
    // Prepare: JSONata's own $clone is JSON.parse($string(…)): doubles rounded to 15 significant digits, numbers
    // kept as their source text turned into the nearest double, in fields the expression never names.
    const engine = createJsonataEngine({ compile: jsonata });
    const text =
      '{"id":12345678901234567890,"ratio":0.30000000000000004,"exact":9007199254740993,"n":1e400,"price":19.99}';
    const payload = parseJsonText(text);
    const expressions = ['$ ~> |$|{"seen":true}|', '$ ~> |$|{}, ["price"]|', '$clone($)'];
    // Act
    const runs = await Promise.all(expressions.map((e) => engine.evaluate(engine.parse(e), payload, {})));
    // Assess
    expect(runs.map((run) => run.ok && JSON.stringify(run.value))).toEqual([
      `${text.slice(0, -1)},"seen":true}`,
      '{"id":12345678901234567890,"ratio":0.30000000000000004,"exact":9007199254740993,"n":1e400}',
      text,
    ]);
  });

  it('keeps $clone what JSONata documents: the context without an argument, its signature, functions as ""', async () => {
    // Prepare: the exact $clone replaces JSONata's own, so it must behave as that one does beyond the digits
    const engine = createJsonataEngine({ compile: jsonata });
    const payload = parseJsonText('{"order":{"a":1,"b":2}}');
    // Act
    const [context, lambda, notAnObject] = await Promise.all(
      ['order.$clone()', '{"f": function($x){$x}, "a": 1} ~> |$|{"b": 2}|', '$clone(5)'].map((e) =>
        engine.evaluate(engine.parse(e), payload, {}),
      ),
    );
    // Assess
    expect(context).toEqual({ ok: true, value: { a: 1, b: 2 } });
    expect(lambda).toEqual({ ok: true, value: { f: '', a: 1, b: 2 } });
    expect(notAnObject).toMatchObject({
      ok: false,
      kind: 'failed',
      reason: expect.stringMatching(/^T0410 /),
    });
  });

  it('compiles each distinct text once', () => {
    const engine = createJsonataEngine({ compile: jsonata });
    expect(engine.parse('order.id')).toBe(engine.parse('order.id'));
    expect(engine.parse('order.id')).not.toBe(engine.parse('order.total'));
  });

  it('throws the syntax error of an expression that does not compile', () => {
    const engine = createJsonataEngine({ compile: jsonata });
    let error: unknown;
    try {
      engine.parse('{ "a": ');
    } catch (e) {
      error = e;
    }
    expect(describeError(error)).toMatch(/^S0\d+ /);
  });

  it('classifies $reject, an empty result and a runtime error', async () => {
    // Prepare
    const engine = createJsonataEngine({ compile: jsonata });
    const run = (text: string) => engine.evaluate(engine.parse(text), aPayload(), {});
    // Act
    const outcomes = await Promise.all([
      run('$reject("too expensive")'),
      run('$reject()'),
      run('order.missing'),
      run('$error("nope")'),
    ]);
    // Assess
    expect(outcomes).toEqual([
      { ok: false, kind: 'rejected', reason: 'too expensive' },
      { ok: false, kind: 'rejected', reason: DEFAULT_REJECT_REASON },
      { ok: false, kind: 'empty', reason: 'the expression produced no value' },
      expect.objectContaining({ ok: false, kind: 'failed', reason: 'D3137 nope at 7' }),
    ]);
  });

  it('stops a CPU-bound expression at the timeout', async () => {
    // Prepare: an endless tail-recursive loop never yields to a timer.
    const engine = createJsonataEngine({ compile: jsonata, timeoutMs: 50 });
    const expression = engine.parse('($loop := function($n) { $loop($n + 1) }; $loop(0))');
    // Act
    const run = await engine.evaluate(expression, aPayload(), {});
    // Assess
    expect(run).toEqual({ ok: false, kind: 'timeout', reason: 'transform timed out after 50 ms' });
  });
});

describe('JSONata evaluations side by side', () => {
  it('run one at a time, and the event loop gets a turn between two that ran past the slice', async () => {
    // Prepare: an expression of many steps (tens of ms), evaluated three times at once; a macrotask queued meanwhile
    // stands for a socket's data. Side by side, their steps interleaved in promise callbacks and the macrotask ran
    // only after all three were done (an outside audit of fairness: a heavy source held every other one's webhooks).
    const engine = createJsonataEngine({ compile: jsonata, timeoutMs: 20_000 });
    const heavy = engine.parse('$count([1..60000].($ * 2)[$ % 3 = 0])');
    const events: string[] = [];
    // Act
    const runs = [0, 1, 2].map((n) => {
      events.push(`start ${n}`);
      return engine.evaluate(heavy, aPayload(), {}).then((run) => {
        events.push(`done ${n}`);
        return run;
      });
    });
    setImmediate(() => events.push('turn'));
    const results = await Promise.all(runs);
    // Assess: every run gave the value; the turn came after the first was done and before the last
    expect(results.map((r) => r.ok && r.value)).toEqual([20000, 20000, 20000]);
    expect(events.indexOf('turn')).toBeGreaterThan(events.indexOf('done 0'));
    expect(events.indexOf('turn')).toBeLessThan(events.indexOf('done 2'));
  });

  it('a run waiting for its turn is not counted against its timeout', async () => {
    // Prepare: each run takes most of the timeout; three at once would pass it if the wait counted.
    const engine = createJsonataEngine({ compile: jsonata, timeoutMs: 2_000 });
    const heavy = engine.parse('$count([1..60000].($ * 2)[$ % 3 = 0])');
    const started = performance.now();
    await engine.evaluate(heavy, aPayload(), {});
    const oneRunMs = performance.now() - started;
    const copies = Math.max(3, Math.ceil(2_000 / Math.max(1, oneRunMs)) + 1);
    // Act
    const results = await Promise.all(
      Array.from({ length: copies }, () => engine.evaluate(heavy, aPayload(), {})),
    );
    // Assess
    expect(results.every((r) => r.ok)).toBe(true);
  });

  it('a run that waited for its turn past ten times its timeout fails as timed out, the others go on', async () => {
    // Prepare: far more runs at once than ten timeouts hold (review of b2cbd6e: the queue had no bound, and the last
    // of 60 heavy runs answered after 27 s)
    const engine = createJsonataEngine({ compile: jsonata, timeoutMs: 100 });
    const light = engine.parse('$count([1..5000].($ * 2)[$ % 3 = 0])');
    const started = performance.now();
    await engine.evaluate(light, aPayload(), {});
    const oneRunMs = Math.max(1, performance.now() - started);
    const copies = Math.ceil((3 * 100 * JSONATA_TURN_WAIT_TIMEOUTS) / oneRunMs);
    // Act
    const results = await Promise.all(
      Array.from({ length: copies }, () => engine.evaluate(light, aPayload(), {})),
    );
    // Assess: the later ones failed after waiting, saying so (on a loaded machine a run may also time out on its own)
    const waitedOut = results.filter((r) => !r.ok && r.reason.includes('for its turn'));
    expect(waitedOut.length).toBeGreaterThan(0);
    expect(waitedOut[0]).toEqual({
      ok: false,
      kind: 'timeout',
      reason: `transform timed out after waiting ${100 * JSONATA_TURN_WAIT_TIMEOUTS} ms for its turn (other transforms of this process were running)`,
    });
    expect(results.filter((r) => r.ok).length).toBeGreaterThan(0);
  });
});

describe('runTransformFunction', () => {
  it('returns what the function returns, sync or async', async () => {
    expect(await runTransformFunction((n: number) => n + 1, 1)).toEqual({ ok: true, value: 2 });
    expect(await runTransformFunction(async (n: number) => n * 3, 2, { timeoutMs: 1000 })).toEqual({
      ok: true,
      value: 6,
    });
  });

  it('reports reject() and a thrown TransformRejectedError as rejections', async () => {
    const helper = await runTransformFunction(() => reject('no customer'), null);
    const thrown = await runTransformFunction(async () => {
      throw new TransformRejectedError('bad currency');
    }, null);
    expect(helper).toEqual({ ok: false, kind: 'rejected', reason: 'no customer' });
    expect(thrown).toEqual({ ok: false, kind: 'rejected', reason: 'bad currency' });
  });

  it('reports any other throw as failed, with the thrown value', async () => {
    // Prepare
    const bug = new TypeError('cannot read x of undefined');
    // Act
    const run = await runTransformFunction(() => {
      throw bug;
    }, null);
    // Assess
    expect(run).toEqual({ ok: false, kind: 'failed', reason: 'cannot read x of undefined', error: bug });
  });

  it('times out and aborts the signal it handed to the function', async () => {
    // Prepare
    let aborted = false;
    const slow = (_input: null, { signal }: { signal: AbortSignal }) =>
      new Promise<string>((resolve) => {
        signal.addEventListener('abort', () => {
          aborted = true;
          resolve('too late');
        });
      });
    // Act
    const run = await runTransformFunction(slow, null, { timeoutMs: 30 });
    // Assess
    expect(run).toEqual({ ok: false, kind: 'timeout', reason: 'transform timed out after 30 ms' });
    expect(aborted).toBe(true);
  });
});

describe('describeError', () => {
  it('reads Error messages and the fields of JSONata error objects', () => {
    expect(describeError(new Error('boom'))).toBe('boom');
    expect(describeError({ code: 'T2002', message: 'The right side', position: 9 })).toBe(
      'T2002 The right side at 9',
    );
    expect(describeError('plain')).toBe('plain');
  });
});
