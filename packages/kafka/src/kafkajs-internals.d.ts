/** kafkajs's request queue, patched by `request-queue.ts` (kafkajs ships no types for its internals). */
declare module 'kafkajs/src/network/requestQueue/index.js' {
  const RequestQueue: {
    new (options: Record<string, unknown>): unknown;
    prototype: unknown;
  };
  export default RequestQueue;
}
