import { ConfigError } from './errors.ts';

/**
 * Route patterns: dot-separated segments where `*` matches exactly one topic segment and `#` zero or more,
 * anywhere in the pattern; any other segment is a literal compared exactly (case-sensitive). A wildcard is always a
 * whole segment (`orders.*` is a pattern, `orders.cre*` is refused). The configuration validates patterns with
 * `topicPatternProblem` and the outbox router matches with `compileTopicPattern`, so both read one syntax.
 *
 * The empty topic has zero segments (not one empty segment), so only a pattern made of `#` matches it. A topic's
 * inner empty segments (`a..b`) are literal segments that `*` takes.
 */
export interface TopicPattern {
  /** The pattern as written. */
  readonly source: string;
  /** Whether `topic` matches. */
  matches(topic: string): boolean;
  /** The same on a topic already split by `topicSegments` (a router splits each topic once for all patterns). */
  matchesSegments(segments: readonly string[]): boolean;
}

const ONE = '*';
const ANY = '#';

/** Splits a topic into segments; the empty topic has none. */
export function topicSegments(topic: string): string[] {
  return topic === '' ? [] : topic.split('.');
}

/**
 * What is wrong with a route pattern, or `undefined` when it is valid. Messages do not quote the pattern, so
 * callers prefix them with its path (`routes[0].match`).
 */
export function topicPatternProblem(pattern: string): string | undefined {
  if (pattern === '') return 'is empty (use "#" to match every topic)';
  const segments = pattern.split('.');
  if (segments.some((s) => s === '')) {
    return 'has an empty segment (two dots in a row, or a leading or trailing dot)';
  }
  if (segments.some((s) => s !== ONE && s !== ANY && (s.includes(ONE) || s.includes(ANY)))) {
    return '"*" and "#" must be whole segments (e.g. "orders.*", "stripe.#")';
  }
  return undefined;
}

/**
 * Compiles a route pattern. Matching is a dynamic programme over (pattern segment, topic segment): time
 * O(pattern × topic) and no backtracking, whatever the number of `#`. Throws ConfigError (issue path `match`) for a
 * pattern `topicPatternProblem` refuses.
 */
export function compileTopicPattern(pattern: string): TopicPattern {
  const problem = topicPatternProblem(pattern);
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

/** Whether `topic` matches the route `pattern`; throws ConfigError for an invalid pattern (see compileTopicPattern). */
export function topicMatches(pattern: string, topic: string): boolean {
  return compileTopicPattern(pattern).matches(topic);
}
