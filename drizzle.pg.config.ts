import { defineConfig } from "drizzle-kit";

// PostgreSQL migrations (several instances); drizzle.config.ts has SQLite's (the embedded default).
export default defineConfig({
  dialect: "postgresql",
  schema: "./lib/store/schema-pg.ts",
  out: "./drizzle/pg",
});
