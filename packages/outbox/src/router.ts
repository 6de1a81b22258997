import { ConfigError, type ConfigIssue } from '@queuebox/core';

/**
 * A compiled topic pattern. Segments are dot-separated; `*` matches exactly one segment, `#` zero or more, anywhere
 * in the pattern. Any other segment is a literal compared exactly (case-sensitive); a wildcard inside a segment
 * (`orders.cre*`) is refused, as the configuration schema refuses it.
 */
export interface TopicPattern {
  readonly source: string;
  /** Whether `topic` matches. The empty topic has zero segments, so only patterns made of `#` match it. */
  matches(topic: string): boolean;
  /** The same on a topic already split into segments. */
  matchesSegments(segments: readonly string[]): boolean;
}

const ONE = '*';
const ANY = '#';

/** Splits a topic into segments; the empty topic has none. */
export function topicSegments(topic: string): string[] {
  return topic === '' ? [] : topic.split('.');
}

/** Why `pattern` is not a usable topic pattern, or undefined when it is. */
export function patternProblem(pattern: string): string | undefined {
  if (pattern === '') return 'a route pattern must not be empty (use "#" to match every topic)';
  const segments = pattern.split('.');
  if (segments.some((s) => s === '')) {
    return `route pattern "${pattern}" has an empty segment (leading, trailing or doubled dot)`;
  }
  if (segments.some((s) => s !== ONE && s !== ANY && (s.includes(ONE) || s.includes(ANY)))) {
    return `route pattern "${pattern}": "*" and "#" must be whole segments (e.g. "orders.*", "stripe.#")`;
  }
  return undefined;
}

/**
 * Compiles a topic pattern. Matching is a dynamic programme over (pattern segment, topic segment): time
 * O(pattern × topic) and no backtracking, whatever the number of `#`. Throws `ConfigError` for an empty pattern, an
 * empty segment or a wildcard inside a segment.
 */
export function compilePattern(pattern: string): TopicPattern {
  const problem = patternProblem(pattern);
  if (problem !== undefined) throw new ConfigError([{ path: 'match', message: problem }]);
  // `#.#` matches what `#` matches; collapsing runs keeps the programme small.
  const segments: string[] = [];
  for (const s of pattern.split('.')) {
    if (s === ANY && segments[segments.length - 1] === ANY) continue;
    segments.push(s);
  }
  const hasWildcard = segments.some((s) => s === ONE || s === ANY);

  const matchesSegments = (topic: readonly string[]): boolean => {
    if (!hasWildcard) {
      if (topic.length !== segments.length) return false;
      for (let i = 0; i < topic.length; i++) if (topic[i] !== segments[i]) return false;
      return true;
    }
    const n = topic.length;
    // reach[j]: the pattern segments seen so far can consume exactly the first j topic segments.
    let reach = new Uint8Array(n + 1);
    reach[0] = 1;
    for (const seg of segments) {
      const next = new Uint8Array(n + 1);
      let any = false;
      if (seg === ANY) {
        let seen = 0;
        for (let j = 0; j <= n; j++) {
          seen |= reach[j] ?? 0;
          next[j] = seen;
          any ||= seen === 1;
        }
      } else {
        for (let j = 0; j < n; j++) {
          if (reach[j] === 1 && (seg === ONE || topic[j] === seg)) {
            next[j + 1] = 1;
            any = true;
          }
        }
      }
      if (!any) return false;
      reach = next;
    }
    return reach[n] === 1;
  };

  return {
    source: pattern,
    matchesSegments,
    matches: (topic) => matchesSegments(topicSegments(topic)),
  };
}

/** What a router needs of a route: its pattern. */
export interface Routable {
  readonly match: string;
}

/** Chooses the route of a topic. */
export interface Router<R extends Routable> {
  /** The first route whose pattern matches `topic`, or undefined. */
  route(topic: string): R | undefined;
}

/** Options of `createRouter`. */
export interface RouterOptions {
  /** Topics whose answer is remembered; the memo is cleared when full. Default 10000; 0 disables it. */
  readonly memoSize?: number;
}

/**
 * Compiles `routes` in order; the first match wins. Every bad pattern is reported at once as a `ConfigError` whose
 * issue paths read `routes[i].match`.
 */
export function createRouter<R extends Routable>(
  routes: readonly R[],
  options: RouterOptions = {},
): Router<R> {
  const issues: ConfigIssue[] = [];
  const compiled: { route: R; pattern: TopicPattern }[] = [];
  routes.forEach((route, i) => {
    const problem = patternProblem(route.match);
    if (problem === undefined) compiled.push({ route, pattern: compilePattern(route.match) });
    else issues.push({ path: `routes[${i}].match`, message: problem });
  });
  if (issues.length > 0) throw new ConfigError(issues);

  const memoSize = options.memoSize ?? 10_000;
  // Topics repeat a lot in practice; `null` remembers "no route".
  const memo = new Map<string, R | null>();

  return {
    route(topic) {
      const known = memo.get(topic);
      if (known !== undefined) return known ?? undefined;
      const segments = topicSegments(topic);
      const found = compiled.find((c) => c.pattern.matchesSegments(segments))?.route;
      if (memoSize > 0) {
        if (memo.size >= memoSize) memo.clear();
        memo.set(topic, found ?? null);
      }
      return found;
    },
  };
}
