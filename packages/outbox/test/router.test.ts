import { ConfigError } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import { createRouter } from '../src/router.ts';

const aRoute = (match: string, destination = 'd') => ({ match, destination });

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
