import { describe, expect, it } from 'vitest';
import {
  ConfigError,
  compileTopicPattern,
  topicMatches,
  topicPatternProblem,
  topicSegments,
} from '../src/index.ts';

describe('compileTopicPattern', () => {
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
    const compiled = compileTopicPattern(pattern);
    // Act
    const result = compiled.matches(topic);
    // Assess
    expect(result).toBe(expected);
  });

  it.each(['', '.', 'a.', '.a', 'a..b', 'a*', 'orders.cre*', 'a.#b'])(
    'refuses the pattern "%s"',
    (pattern) => {
      expect(() => compileTopicPattern(pattern)).toThrow(ConfigError);
    },
  );

  it('matches many segments and many # without catastrophic backtracking', () => {
    // Prepare: a backtracking matcher explores ~C(200, 30) paths here; the programme is 31 × 201 cells.
    const pattern = compileTopicPattern(`${Array.from({ length: 30 }, () => '#.a').join('.')}.b`);
    const topic = Array.from({ length: 200 }, () => 'a').join('.');
    // Act
    const miss = pattern.matches(topic);
    const hit = pattern.matches(`${topic}.b`);
    // Assess
    expect(miss).toBe(false);
    expect(hit).toBe(true);
  });
});

describe('the empty topic', () => {
  // One rule for the configuration and the router: '' has zero segments (it is not one empty segment), so only a
  // pattern made of `#` matches it; `*` needs exactly one segment.
  it.each([
    ['#', true],
    ['#.#', true],
    ['*', false],
    ['#.*', false],
    ['a.#', false],
  ])('%s matches it: %s', (pattern, expected) => {
    expect(topicMatches(pattern, '')).toBe(expected);
    expect(compileTopicPattern(pattern).matchesSegments(topicSegments(''))).toBe(expected);
  });
});

describe('topicSegments', () => {
  it('gives the empty topic zero segments', () => {
    expect(topicSegments('')).toEqual([]);
    expect(topicSegments('a.b')).toEqual(['a', 'b']);
  });
});

describe('topic patterns', () => {
  it.each([
    ['orders.*', 'orders.created', true],
    ['orders.*', 'orders.created.v2', false],
    ['orders.#', 'orders', true],
    ['orders.#', 'orders.a.b', true],
    ['#', 'anything.at.all', true],
    ['*.created', 'orders.created', true],
    ['a.#.z', 'a.z', true],
    ['a.#.z', 'a.b.c.z', true],
    ['a.#.z', 'a.b.c', false],
    ['orders.created', 'orders.created', true],
    ['orders.created', 'orders.deleted', false],
  ])('%s matches %s: %s', (pattern, topic, expected) => {
    expect(topicMatches(pattern, topic)).toBe(expected);
  });

  it('accept whole-segment wildcards only', () => {
    expect(topicPatternProblem('a.*.#')).toBeUndefined();
    expect(topicPatternProblem('a.b*')).toContain('whole segments');
    expect(topicPatternProblem('a.')).toContain('empty segment');
    expect(topicPatternProblem('')).toContain('is empty');
  });

  it('refuse to match with an invalid pattern', () => {
    expect(() => topicMatches('a..b', 'a.b')).toThrow(ConfigError);
  });
});
