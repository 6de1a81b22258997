/**
 * The small JSONPath subset that sources use to read fields (`eventTypePath`, `idempotencyKey.path`, …):
 * `$` followed by `.name`, `[index]`, `['name']` or `["name"]` steps, e.g. `$.data.object.id` or `$.items[0]['a.b']`.
 */

const STEP = /^(?:\.([^.[\]'"\s]+)|\[(\d+)\]|\['([^']*)'\]|\["([^"]*)"\])/;

/** The steps of a path (`$.a[0]` → `['a', 0]`), or `undefined` when it is not in the supported subset. */
export function parseJsonPath(path: string): (string | number)[] | undefined {
  if (!path.startsWith('$')) return undefined;
  const steps: (string | number)[] = [];
  let rest = path.slice(1);
  while (rest.length > 0) {
    const m = STEP.exec(rest);
    if (!m) return undefined;
    if (m[1] !== undefined) steps.push(m[1]);
    else if (m[2] !== undefined) steps.push(Number(m[2]));
    else steps.push(m[3] ?? m[4] ?? '');
    rest = rest.slice(m[0].length);
  }
  return steps;
}

/** What is wrong with a path, or `undefined` when it is valid. */
export function jsonPathProblem(path: string): string | undefined {
  if (parseJsonPath(path) !== undefined) return undefined;
  return "is not a supported JSON path: use $ followed by .name, [index] or ['name'] steps, e.g. $.data.id";
}

/** The value at a parsed or textual path inside `value`, or `undefined` when any step is missing. */
export function selectJsonPath(value: unknown, path: string | readonly (string | number)[]): unknown {
  const steps = typeof path === 'string' ? parseJsonPath(path) : path;
  if (steps === undefined) return undefined;
  let current: unknown = value;
  for (const step of steps) {
    if (typeof step === 'number') {
      if (!Array.isArray(current)) return undefined;
      current = current[step];
    } else {
      if (current === null || typeof current !== 'object' || Array.isArray(current)) return undefined;
      if (!Object.hasOwn(current, step)) return undefined;
      current = (current as Record<string, unknown>)[step];
    }
  }
  return current;
}
