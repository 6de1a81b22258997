/**
 * Route patterns: dot-separated segments where `*` matches exactly one topic segment and `#` zero or more.
 * A wildcard is always a whole segment (`orders.*` is a pattern, `orders.cre*` is refused).
 */

/** What is wrong with a route pattern, or `undefined` when it is valid. */
export function topicPatternProblem(pattern: string): string | undefined {
  if (pattern === '') return 'is empty';
  const segments = pattern.split('.');
  if (segments.some((s) => s === ''))
    return 'has an empty segment (two dots in a row, or a leading or trailing dot)';
  if (segments.some((s) => s !== '*' && s !== '#' && (s.includes('*') || s.includes('#')))) {
    return '"*" and "#" must be whole segments (e.g. "orders.*", "stripe.#")';
  }
  return undefined;
}

/** Whether `topic` matches a valid route `pattern` (`*` one segment, `#` zero or more). */
export function topicMatches(pattern: string, topic: string): boolean {
  const p = pattern.split('.');
  const t = topic.split('.');
  // Positions reachable in the topic after matching a prefix of the pattern; `#` fans out.
  let reachable = new Set<number>([0]);
  for (const segment of p) {
    const next = new Set<number>();
    for (const i of reachable) {
      if (segment === '#') {
        for (let j = i; j <= t.length; j++) next.add(j);
      } else if (i < t.length && (segment === '*' || segment === t[i])) {
        next.add(i + 1);
      }
    }
    if (next.size === 0) return false;
    reachable = next;
  }
  return reachable.has(t.length);
}
