/**
 * Types of the two undici modules the HTTP publisher imports directly (the package's index also loads fetch,
 * WebSocket, caches and more: about 750 KiB in every Lambda bundle, against about a fifth of that for these).
 * They are the very classes and errors the package exports.
 */
declare module 'undici/lib/dispatcher/client.js' {
  import type { Client } from 'undici';

  const ClientClass: typeof Client;
  export default ClientClass;
}

declare module 'undici/lib/core/errors.js' {
  import type { errors } from 'undici';

  const undiciErrors: typeof errors;
  export = undiciErrors;
}

declare module 'undici/lib/core/connect.js' {
  import type { buildConnector } from 'undici';

  const build: typeof buildConnector;
  export default build;
}
