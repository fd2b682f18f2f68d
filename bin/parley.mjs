#!/usr/bin/env node
// The `parley` command: loads the TypeScript CLI through tsx (a runtime dependency).
import { register } from "tsx/esm/api";

register();
const { main } = await import("../cli/parley.ts");
process.exitCode = await main(process.argv.slice(2));
