// Runs once in the test runner's own process before any test file starts (`npm test`'s
// --test-global-setup): the first run after an install makes the migrated PGlite dump here, once,
// instead of in each of the first files started side by side, and fills Node's compile cache with the
// modules every test process loads, so those first files do not each compile them again.
import module from 'node:module';
import { pgliteTemplate } from './pglite-template.ts';

export async function globalSetup(): Promise<void> {
  await Promise.all([pgliteTemplate(), import('./app.ts')]);
  module.flushCompileCache();
}
