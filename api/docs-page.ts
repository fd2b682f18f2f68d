import crypto from "node:crypto";
import type { openApiDocument } from "./openapi";

// The readable API page (/docs), rendered on the server from the OpenAPI document: no script, no
// CDN, one inline stylesheet allowed by its hash, so the page's CSP stays as strict as the API's.

type Schema = {
  type?: string | string[];
  properties?: Record<string, Schema>;
  required?: string[];
  items?: Schema;
  enum?: unknown[];
  anyOf?: Schema[];
  oneOf?: Schema[];
  format?: string;
  minimum?: number;
  maximum?: number;
  minLength?: number;
  maxLength?: number;
  minItems?: number;
  maxItems?: number;
  pattern?: string;
  nullable?: boolean;
  default?: unknown;
};
type Operation = {
  summary: string;
  tags: string[];
  parameters: { name: string; in: string; required: boolean; schema: Schema }[];
  security?: unknown[];
  requestBody?: { content: Record<string, { schema: Schema }> };
  responses: Record<string, { description: string; content?: Record<string, { schema: Schema }> }>;
};

const STYLE = `body{font:15px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#1a1a1a;background:#fff}
h1{margin-bottom:.2rem}h2{margin-top:2.5rem;border-bottom:1px solid #ccc;text-transform:capitalize}
section{margin:1.2rem 0 2rem}h3{font:600 1rem ui-monospace,monospace;margin:.2rem 0}
.m{display:inline-block;min-width:4rem;color:#fff;border-radius:3px;padding:0 .4rem;margin-right:.5rem;text-align:center}
.get{background:#1b5e20}.post{background:#0d47a1}.delete{background:#b71c1c}
table{border-collapse:collapse;width:100%;margin:.4rem 0}td,th{border:1px solid #ddd;padding:.2rem .5rem;text-align:left;vertical-align:top}
th{background:#f3f3f3}code{font:.9em ui-monospace,monospace}.owner{color:#6a1b9a;font-size:.9em}nav a{margin-right:.8rem}`;
const STYLE_HASH = crypto.createHash("sha256").update(STYLE).digest("base64");

/** The Content-Security-Policy of the docs page. */
export const DOCS_CSP = `default-src 'none'; style-src 'sha256-${STYLE_HASH}'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'`;

const esc = (s: unknown) => String(s).replace(/[&<>"']/g, (ch) => `&#${ch.charCodeAt(0)};`);

function typeOf(s: Schema): string {
  if (s.enum) return s.enum.map((v) => JSON.stringify(v)).join(" | ");
  const alts = s.anyOf ?? s.oneOf;
  if (alts) return alts.map(typeOf).join(" | ");
  if (s.type === "array") return `${s.items ? typeOf(s.items) : "any"}[]`;
  const t = Array.isArray(s.type) ? s.type.join(" | ") : (s.type ?? "any");
  return s.format ? `${t} (${s.format})` : t;
}

function rules(s: Schema): string {
  const r: string[] = [];
  if (s.minLength !== undefined || s.maxLength !== undefined) r.push(`${s.minLength ?? 0}..${s.maxLength ?? "∞"} characters`);
  if (s.minimum !== undefined || s.maximum !== undefined) r.push(`${s.minimum ?? "-∞"}..${s.maximum ?? "∞"}`);
  if (s.minItems !== undefined || s.maxItems !== undefined) r.push(`${s.minItems ?? 0}..${s.maxItems ?? "∞"} items`);
  if (s.pattern) r.push(`matches ${s.pattern}`);
  if (s.default !== undefined) r.push(`default ${JSON.stringify(s.default)}`);
  if (s.nullable) r.push("may be null");
  return r.join("; ");
}

/** The fields of an object schema, nested objects flattened to dotted names (one level of arrays too). */
function fieldRows(s: Schema, prefix = ""): string[] {
  const rows: string[] = [];
  for (const [name, field] of Object.entries(s.properties ?? {})) {
    const full = prefix + name;
    const required = s.required?.includes(name) ? "yes" : "";
    rows.push(`<tr><td><code>${esc(full)}</code></td><td><code>${esc(typeOf(field))}</code></td><td>${required}</td><td>${esc(rules(field))}</td></tr>`);
    const inner = field.type === "array" ? field.items : field;
    if (inner?.properties && prefix.split(".").length < 3) rows.push(...fieldRows(inner, `${full}${field.type === "array" ? "[]" : ""}.`));
  }
  return rows;
}

const table = (head: string, rows: string[]) =>
  rows.length ? `<table><tr>${head}</tr>${rows.join("")}</table>` : "";
const FIELD_HEAD = "<th>field</th><th>type</th><th>required</th><th>rules</th>";

function operation(method: string, path: string, op: Operation): string {
  const params = op.parameters.map(
    (p) => `<tr><td><code>${esc(p.name)}</code></td><td>${esc(p.in)}</td><td><code>${esc(typeOf(p.schema))}</code></td><td>${p.required ? "yes" : ""}</td><td>${esc(rules(p.schema))}</td></tr>`,
  );
  const body = op.requestBody?.content["application/json"]?.schema;
  const [status, ok] = Object.entries(op.responses).find(([code]) => code !== "default")!;
  const produced = Object.entries(ok.content ?? {})[0];
  const response = produced?.[0] === "application/json" ? produced[1].schema : undefined;
  return `<section id="${esc(`${method}-${path}`)}">
<h3><span class="m ${esc(method)}">${esc(method.toUpperCase())}</span>${esc(path)}</h3>
<p>${esc(op.summary)}${op.security ? ' <span class="owner">(owner token: <code>Authorization: Bearer &lt;owner_token&gt;</code>)</span>' : ""}</p>
${table("<th>parameter</th><th>in</th><th>type</th><th>required</th><th>rules</th>", params)}
${body ? `<p>Body (JSON):</p>${table(FIELD_HEAD, fieldRows(body))}` : ""}
<p>${esc(status)}${produced ? `: <code>${esc(produced[0])}</code>` : ""}</p>
${response?.properties ? table(FIELD_HEAD, fieldRows(response)) : ""}
</section>`;
}

/** /docs: every operation of /openapi.json, grouped by tag, with its fields and limits. */
export function apiDocsHtml(doc: ReturnType<typeof openApiDocument>): string {
  const byTag = new Map<string, string[]>();
  for (const [path, ops] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(ops as Record<string, Operation>)) {
      const tag = op.tags[0] ?? "other";
      byTag.set(tag, [...(byTag.get(tag) ?? []), operation(method, path, op)]);
    }
  }
  const tags = [...byTag.keys()];
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Parley API</title><style>${STYLE}</style></head>
<body><main>
<h1>Parley API</h1>
<p>${esc(doc.info.description)} Base URL: <code>${esc(doc.servers[0]?.url ?? "")}</code>. Machine-readable: <a href="/openapi.json">/openapi.json</a>; for agents: <a href="/agents.md">/agents.md</a>.</p>
<p>Every error is <code>{"detail": "…", "code": "…"}</code> with one of the codes: ${doc.components.schemas.Error.properties.code.enum.map((c) => `<code>${esc(c)}</code>`).join(", ")}.</p>
<nav>${tags.map((t) => `<a href="#${esc(t)}">${esc(t)}</a>`).join("")}</nav>
${tags.map((t) => `<h2 id="${esc(t)}">${esc(t)}</h2>\n${byTag.get(t)!.join("\n")}`).join("\n")}
</main></body></html>`;
}
