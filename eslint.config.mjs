import js from "@eslint/js";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["node_modules/", ".next/", "data/", "drizzle/", "test-results/", "next-env.d.ts"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { console: "readonly", process: "readonly", URL: "readonly", fetch: "readonly", setTimeout: "readonly", clearTimeout: "readonly", setInterval: "readonly", clearInterval: "readonly", TextEncoder: "readonly", TextDecoder: "readonly", AbortController: "readonly", AbortSignal: "readonly", Response: "readonly", Request: "readonly", ReadableStream: "readonly", Buffer: "readonly", queueMicrotask: "readonly", performance: "readonly", window: "readonly", document: "readonly", navigator: "readonly", EventSource: "readonly", localStorage: "readonly", crypto: "readonly", structuredClone: "readonly" } },
    rules: {
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_", destructuredArrayIgnorePattern: "^_" }],
    },
  },
  {
    files: ["tests/**/*.ts"],
    rules: { "@typescript-eslint/no-explicit-any": "off" },
  },
);
