import { defineConfig } from 'vite';

// Everything is bundled (no CDN); hashed file names under assets/ let the gateway cache them for a year.
export default defineConfig({
  base: '/',
  build: { outDir: 'dist', emptyOutDir: true, target: 'es2022', sourcemap: false, chunkSizeWarningLimit: 1024 },
  define: { 'process.env.NODE_DEBUG': 'undefined' },
});
