/**
 * `npm start`: the local runtime with ./queuebox.yaml (or the file QUEUEBOX_CONFIG names), on the embedded
 * PGlite unless `database` is configured. Stop it with Ctrl-C or SIGTERM.
 */
import { runDev } from './dev.ts';

await runDev();
