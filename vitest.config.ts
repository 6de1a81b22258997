import { configDefaults, defineConfig } from 'vitest/config';

/** Where test files live. A test file anywhere else would never run (test/lanes.test.ts checks that). */
export const TEST_FILES = [
  'packages/*/src/**/*.test.ts',
  'packages/*/test/**/*.test.ts',
  'test/**/*.test.ts',
];

/**
 * Files that talk to a service (PostgreSQL, PGlite, SQL Server, RabbitMQ, NATS, Kafka, ElasticMQ), start QueueBox
 * processes, build bundles or type-check a whole program say so in their name. Every other test file is a unit test.
 */
export const INTEGRATION_FILES = TEST_FILES.map((glob) =>
  glob.replace(/\*\.test\.ts$/, '*.integration.test.ts'),
);

export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Integration files each own a schema; running them in parallel files is safe.
    fileParallelism: true,
    projects: [
      {
        test: {
          name: 'unit',
          include: TEST_FILES,
          exclude: [...configDefaults.exclude, ...INTEGRATION_FILES],
          // Refuses every connection to a service, so a test that needs one cannot stay in this lane.
          setupFiles: ['test/no-services.ts'],
          // Unit modules keep no state between files; evaluating shared modules once per worker instead of once
          // per file cuts the lane from about 60 s to about 20 s on a loaded 2-core machine.
          isolate: false,
        },
      },
      {
        test: {
          name: 'integration',
          include: INTEGRATION_FILES,
        },
      },
    ],
  },
});
