import { ConfigError } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import { compilePattern, createRouter, topicSegments } from '../src/router.ts';

const aRoute = (match: string, destination = 'd') => ({ match, destination });

describe('compilePattern', () => {
  it.each([
    // pattern, topic, matches
    ['a.b.c', 'a.b.c', true],
    ['a.b.c', 'a.b', false],
    ['a.b.c', 'a.b.c.d', false],
    ['a.b.c', 'a.B.c', false],
    ['*', 'a', true],
    ['*', '', false],
    ['*', 'a.b', false],
    ['a.*', 'a.b', true],
    ['a.*', 'a', false],
    ['a.*', 'a.b.c', false],
    ['*.b.*', 'x.b.y', true],
    ['#', '', true],
    ['#', 'a', true],
    ['#', 'a.b.c.d', true],
    ['#.#', '', true],
    ['#.#', 'a.b', true],
    ['a.#', 'a', true],
    ['a.#', 'a.b.c', true],
    ['a.#', 'b.a', false],
    ['#.z', 'z', true],
    ['#.z', 'a.b.z', true],
    ['#.z', 'a.b.z.q', false],
    ['a.#.z', 'a.z', true],
    ['a.#.z', 'a.b.c.z', true],
    ['a.#.z', 'a.b.c', false],
    ['a.#.z', 'z.a.z', false],
    ['a.#.*', 'a', false],
    ['a.#.*', 'a.b', true],
    ['#.*.#', '', false],
    ['#.*.#', 'x', true],
    ['a.*.#.c', 'a.b.c', true],
    ['a.*.#.c', 'a.c', false],
    ['#.a.#.a.#', 'a.a', true],
    ['#.a.#.a.#', 'x.a.y', false],
    // A topic's empty segments are literal segments; `*` takes them.
    ['a.*.b', 'a..b', true],
  ])('%s against "%s" → %s', (pattern, topic, expected) => {
    // Prepare
    const compiled = compilePattern(pattern);
    // Act
    const result = compiled.matches(topic);
    // Assess
    expect(result).toBe(expected);
  });

  it.each(['', '.', 'a.', '.a', 'a..b', 'a*', 'orders.cre*', 'a.#b'])(
    'refuses the pattern "%s"',
    (pattern) => {
      expect(() => compilePattern(pattern)).toThrow(ConfigError);
    },
  );

  it('matches many segments and many # without catastrophic backtracking', () => {
    // Prepare: a backtracking matcher explores ~C(200, 30) paths here; the programme is 31 × 201 cells.
    const pattern = compilePattern(`${Array.from({ length: 30 }, () => '#.a').join('.')}.b`);
    const topic = Array.from({ length: 200 }, () => 'a').join('.');
    // Act
    const miss = pattern.matches(topic);
    const hit = pattern.matches(`${topic}.b`);
    // Assess
    expect(miss).toBe(false);
    expect(hit).toBe(true);
  });
});

describe('topicSegments', () => {
  it('gives the empty topic zero segments', () => {
    expect(topicSegments('')).toEqual([]);
    expect(topicSegments('a.b')).toEqual(['a', 'b']);
  });
});

describe('createRouter', () => {
  it('returns the first matching route', () => {
    // Prepare
    const routes = [aRoute('orders.created', 'first'), aRoute('orders.*', 'second'), aRoute('#', 'fallback')];
    const router = createRouter(routes);
    // Act
    const picks = ['orders.created', 'orders.paid', 'users.x'].map((t) => router.route(t)?.destination);
    // Assess
    expect(picks).toEqual(['first', 'second', 'fallback']);
  });

  it('returns undefined when no route matches, the same on a repeated (memoized) topic', () => {
    // Prepare
    const router = createRouter([aRoute('a.*')]);
    // Act
    const first = router.route('b.c');
    const again = router.route('b.c');
    // Assess
    expect(first).toBeUndefined();
    expect(again).toBeUndefined();
    expect(router.route('a.c')?.match).toBe('a.*');
  });

  it('returns the route object given, not a copy', () => {
    const route = aRoute('x.#');
    expect(createRouter([route]).route('x.y')).toBe(route);
  });

  it('keeps answering correctly after its memo fills and is cleared', () => {
    // Prepare
    const router = createRouter([aRoute('even.*', 'even'), aRoute('#', 'other')], { memoSize: 3 });
    // Act
    const picks = Array.from({ length: 10 }, (_, i) => router.route(i % 2 === 0 ? `even.${i}` : `odd.${i}`));
    // Assess
    expect(picks.map((r) => r?.destination)).toEqual(
      Array.from({ length: 10 }, (_, i) => (i % 2 === 0 ? 'even' : 'other')),
    );
  });

  it('reports every bad pattern with its path', () => {
    // Prepare
    const routes = [aRoute('ok.*'), aRoute(''), aRoute('a..b')];
    // Act
    let error: unknown;
    try {
      createRouter(routes);
    } catch (e) {
      error = e;
    }
    // Assess
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).issues.map((i) => i.path)).toEqual(['routes[1].match', 'routes[2].match']);
  });
});
