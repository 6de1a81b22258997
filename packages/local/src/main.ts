/**
 * `npm start`: the local runtime with ./queuebox.yaml (or the file QUEUEBOX_CONFIG names), on the embedded
 * PGlite unless `database` is configured. Stop it with Ctrl-C, SIGTERM or SIGHUP (which does not reload the
 * configuration: restart to apply a change). Run it directly in production, not through `npm start` (README.md).
 */
import { runDev } from './dev.ts';

await runDev();
