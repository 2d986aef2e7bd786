import path from 'node:path';
import { defineConfig } from 'vite';

// The web client (issue 18): Preact components, one entry, hashed assets under /assets/ (the service
// caches them for a year). The price chart's library is a separate chunk, loaded on first use.
export default defineConfig({
  root: import.meta.dirname,
  base: '/',
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  build: {
    outDir: path.join(import.meta.dirname, 'dist'),
    emptyOutDir: true,
    target: 'es2022',
    sourcemap: false,
    // The service sends its own CSP: no inline script, so no module-preload polyfill inlined either.
    modulePreload: { polyfill: false },
    chunkSizeWarningLimit: 400,
  },
});
