// Builds the console into the Python package, which serves it at / (src/agentloom/stitch/console.py).
// `npm run dev` serves it with hot reload and sends /api to a Stitch server on 127.0.0.1:8000.
import { defineConfig } from "vite";

export default defineConfig({
  base: "/",
  build: { outDir: "../src/agentloom/stitch/console_dist", emptyOutDir: true, chunkSizeWarningLimit: 1000 },
  server: { proxy: { "/api": "http://127.0.0.1:8000" } },
});
