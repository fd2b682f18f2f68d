// JavaScript, not TypeScript: a next.config.ts is compiled with SWC at every start, and the
// server then keeps SWC's native module (about 24 MB resident) loaded for nothing.
/** @type {import("next").NextConfig} */
const config = {
  // The SQLite driver is a native module: Node loads it, the bundler must not.
  serverExternalPackages: ["better-sqlite3"],
  poweredByHeader: false,
  // Pages show no optimised images (the CSP allows only same-origin and data: images anyway).
  images: { unoptimized: true },
  // Metadata (the markdown <link rel="alternate">) always goes in <head>, never streamed into
  // <body>: agents that read the HTML do not run scripts.
  htmlLimitedBots: /.*/,
  // `npm run typecheck` (tsc over the whole project, tests included) is the type check; the build
  // does not repeat it, so `npm start` can build even while unrelated code is mid-change.
  typescript: { ignoreBuildErrors: true },
};

export default config;
