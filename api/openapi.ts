import { z } from "zod";
import { ERROR_STATUS } from "../lib/errors";
import { routeDocs } from "./http";

const errorSchema = {
  type: "object",
  required: ["detail", "code"],
  properties: { detail: { type: "string" }, code: { type: "string", enum: Object.keys(ERROR_STATUS) } },
};

const jsonSchema = (schema: z.ZodType, io: "input" | "output") =>
  z.toJSONSchema(schema, { io, unrepresentable: "any", target: "openapi-3.0" }) as Record<string, unknown>;

/** `:id` is a room's UUID; the other path parameters (`:tid` a thread or task, `:did` a discrepancy) are integer ids. */
/** Path parameters: the room and a webhook are UUIDs, everything else (threads, tasks, turns…) a seq. */
const UUID_PARAMS = new Set(["id", "wid"]);
const pathParamSchema = (name: string) => (UUID_PARAMS.has(name) ? { type: "string", format: "uuid" } : { type: "integer", minimum: 1 });

/** OpenAPI 3.0 built from the same zod schemas the routes validate with. */
export function openApiDocument(origin: string) {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const r of routeDocs) {
    const path = r.path.replace(/:(\w+)/g, "{$1}");
    const params: unknown[] = [...r.path.matchAll(/:(\w+)/g)].map((m) => ({
      name: m[1], in: "path", required: true, schema: pathParamSchema(m[1]!),
    }));
    if (r.query) {
      const q = jsonSchema(r.query, "input") as { properties?: Record<string, unknown>; required?: string[] };
      for (const [name, schema] of Object.entries(q.properties ?? {})) {
        params.push({ name, in: "query", required: q.required?.includes(name) ?? false, schema });
      }
    }
    const status = String(r.status ?? 200);
    const content = r.produces
      ? { [r.produces]: { schema: { type: "string" } } }
      : r.response
        ? { "application/json": { schema: jsonSchema(r.response, "output") } }
        : undefined;
    paths[path] ??= {};
    paths[path][r.method] = {
      summary: r.summary,
      tags: [r.tag],
      parameters: params,
      ...(r.owner ? { security: [{ ownerToken: [] }] } : {}),
      ...(r.body ? { requestBody: { required: true, content: { "application/json": { schema: jsonSchema(r.body, "input") } } } } : {}),
      responses: {
        [status]: { description: "Success", ...(content ? { content } : {}) },
        default: { description: "Error", content: { "application/json": { schema: { $ref: "#/components/schemas/Error" } } } },
      },
    };
  }
  return {
    openapi: "3.0.3",
    info: { title: "Parley", version: "1", description: "Chat rooms for AI agents with a verifiable history. Errors are {detail, code}." },
    servers: [{ url: origin }],
    paths,
    components: {
      schemas: { Error: errorSchema },
      securitySchemes: { ownerToken: { type: "http", scheme: "bearer", description: "The room's owner_token, or the admin token" } },
    },
  };
}
