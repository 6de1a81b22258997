import { ConfigError, type ConfigIssue } from '@queuebox/core';
import { DEFAULT_BACKOFF, resolveBackoff } from './backoff.ts';
import type { BackoffOptions, DestinationOptions, RouteOptions } from './options.ts';
import { createRouter, type Router } from './router.ts';
import {
  type CompiledTransform,
  chainTransforms,
  checkTransforms,
  createTransformCompiler,
  createTransformRegistry,
  type TransformRegistry,
} from './transforms.ts';

/** Where a routed row goes: its destination, that destination's options and backoff, and the transforms to apply. */
export interface Target {
  readonly destination: string;
  readonly options: DestinationOptions;
  readonly backoff: BackoffOptions;
  /** The route's own transform, then the destination's; undefined when neither has one. */
  readonly transform: CompiledTransform | undefined;
}

/** What {@link compileTargets} works with: the routing part of the poller's dependencies. */
export interface TargetSources {
  /** In order; the first matching route wins. */
  readonly routes: readonly RouteOptions[];
  readonly destinations: Readonly<Record<string, DestinationOptions>>;
  /** Named transform functions. Default: none. */
  readonly transforms?: TransformRegistry;
  /** The outbox-wide backoff a destination's own refines. Default `DEFAULT_BACKOFF`. */
  readonly backoff?: BackoffOptions;
  /** Time one transform may take before it counts as a rejection. Default: the compiler's (1000 ms). */
  readonly transformTimeoutMs?: number;
}

/** Finds the target of a topic: undefined when no route matches. */
export type TargetLookup = (topic: string) => Target | undefined;

/**
 * Compiles routes, destinations and transforms into a topic → target lookup. Validates everything up front and
 * throws one `ConfigError` listing every problem: bad route patterns, routes naming unknown destinations, unknown
 * transform functions, JSONata syntax.
 */
export function compileTargets(sources: TargetSources): TargetLookup {
  const issues: ConfigIssue[] = [];
  let router: Router<RouteOptions> | undefined;
  try {
    router = createRouter(sources.routes);
  } catch (error) {
    if (error instanceof ConfigError) issues.push(...error.issues);
    else throw error;
  }
  sources.routes.forEach((route, i) => {
    if (!Object.hasOwn(sources.destinations, route.destination)) {
      issues.push({
        path: `routes[${i}].destination`,
        message: `no destination named "${route.destination}" (known: ${Object.keys(sources.destinations).join(', ') || 'none'})`,
      });
    }
  });
  const compiler = createTransformCompiler({
    registry: sources.transforms ?? createTransformRegistry(),
    timeoutMs: sources.transformTimeoutMs,
  });
  issues.push(...checkTransforms(compiler, sources.routes, sources.destinations));
  if (issues.length > 0 || router === undefined) throw new ConfigError(issues);
  const routeOf = router;

  const outboxBackoff = sources.backoff ?? DEFAULT_BACKOFF;
  const destinationTransforms = new Map<string, CompiledTransform | undefined>();
  for (const [name, destination] of Object.entries(sources.destinations)) {
    const spec = destination.transform;
    destinationTransforms.set(name, spec && compiler.compile(spec, `destinations.${name}.transform`));
  }
  const targets = new Map<RouteOptions, Target>();
  sources.routes.forEach((route, i) => {
    const destination = sources.destinations[route.destination] as DestinationOptions;
    const own = route.transform && compiler.compile(route.transform, `routes[${i}].transform`);
    const chain = [own, destinationTransforms.get(route.destination)].filter((t) => t !== undefined);
    targets.set(route, {
      destination: route.destination,
      options: destination,
      backoff: resolveBackoff(outboxBackoff, destination.backoff),
      transform: chainTransforms(chain),
    });
  });

  return (topic) => {
    const route = routeOf.route(topic);
    return route === undefined ? undefined : (targets.get(route) as Target);
  };
}
