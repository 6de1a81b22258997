import {
  ConfigError,
  type ConfigIssue,
  compileTopicPattern,
  type TopicPattern,
  topicPatternProblem,
  topicSegments,
} from '@queuebox/core';

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
    const problem = topicPatternProblem(route.match);
    if (problem === undefined) compiled.push({ route, pattern: compileTopicPattern(route.match) });
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
