/**
 * The esbuild plugins of every function bundle, in the shape SST's `nodejs.plugins` loads (a default export that
 * is a list of plugins). infra/functions-plan.ts FUNCTION_BUNDLE names this file; scripts/check-bundles.ts and
 * bench/lambda.ts load it too, so all three bundle alike. SST runs it with plain `node` (Node 24 strips the types).
 */
import { aliasPlugin } from './aliases.ts';

export default [aliasPlugin()];
