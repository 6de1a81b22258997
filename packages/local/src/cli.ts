#!/usr/bin/env node
/** The `queuebox` command (see USAGE in commands.ts). */
import { runCli } from './commands.ts';

const code = await runCli(process.argv.slice(2), {
  out: (text) => process.stdout.write(text),
  err: (text) => process.stderr.write(text),
  isTTY: process.stderr.isTTY === true,
});
// Setting the code, not exiting: `dev` keeps running until a signal, the other commands end when their work does.
process.exitCode = code;
