// The JSON Schemas tools/list advertises. Every tools/list answer carries all of them, and an agent
// reads them on every connection, so they say what a caller needs to form a call (names, types,
// enums, required fields, bounded ranges) and leave the rest to the REST schemas `run` validates
// with, whose refusals name the field and the rule (SPEC 8: the whole answer ≤ 16 KB).
import { z } from "zod";

type Json = Record<string, unknown>;

/** Keys that only cost bytes: the server checks them anyway and says which one failed. */
const DROPPED = new Set(["$schema", "additionalProperties", "propertyNames", "default", "pattern", "format", "minLength", "maxLength", "minItems", "maxItems", "exclusiveMinimum", "exclusiveMaximum"]);

/** The largest upper bound worth advertising (see `lean`). */
const MAX_ADVERTISED_BOUND = 100;

const isBareType = (v: unknown): v is { type: string } =>
  typeof v === "object" && v !== null && Object.keys(v).length === 1 && typeof (v as { type?: unknown }).type === "string";

function lean(node: unknown, io: "input" | "output", depth: number): unknown {
  if (Array.isArray(node)) return node.map((n) => lean(n, io, depth));
  if (node === null || typeof node !== "object") return node;
  const src = node as Json;
  const out: Json = {};
  for (const [key, value] of Object.entries(src)) {
    if (DROPPED.has(key)) continue;
    // A small range is a choice the caller makes (wait ≤ 25, priority 0..9) and worth its bytes; a
    // lone lower bound (an id ≥ 1) or a guard (a lease of at most 3600 s) is left to the server.
    if ((key === "minimum" || key === "maximum") && !(typeof src.maximum === "number" && src.maximum <= MAX_ADVERTISED_BOUND)) continue;
    if (key === "properties" && typeof value === "object" && value !== null && Object.keys(value).length === 0) continue;
    // Outputs name the fields a tool promises at the top; nested required lists add nothing to that.
    if (key === "required" && io === "output" && depth > 0) continue;
    // Under `properties` the keys are field names, never keywords: each field is a schema of its own.
    const v =
      key === "properties" && value !== null && typeof value === "object"
        ? Object.fromEntries(Object.entries(value).map(([field, s]) => [field, lean(s, io, depth + 1)]))
        : lean(value, io, key === "items" ? depth + 1 : depth);
    if (key === "anyOf" && Array.isArray(v) && v.every(isBareType)) out.type = v.map((t) => t.type);
    else out[key] = v;
  }
  return out;
}

/** The advertised JSON Schema of a zod object (input: what a call may send; output: what it returns). */
export function advertised(schema: z.ZodType, io: "input" | "output"): { type: "object"; [key: string]: unknown } {
  const json = z.toJSONSchema(schema, { io, unrepresentable: "any" });
  return lean(json, io, 0) as { type: "object" };
}
