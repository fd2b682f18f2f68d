/**
 * The admin console's pages, rendered on the server from the admin API's own answers: no script,
 * no CDN, one inline stylesheet allowed by its hash (the site's colours and controls, from
 * app/globals.css), forms that post back to /admin with the session's form token. The pages ask
 * for the `same-origin` referrer policy, so their form posts carry an Origin header to check.
 */
import crypto from "node:crypto";
import type { AdminRoomView, AlertView, ReportView } from "./views";
import type { auditView } from "./audit";

type AuditView = ReturnType<typeof auditView>;

const STYLE = `:root{--bg:#f6f6f3;--surface:#fff;--text:#1d2026;--muted:#5f6672;--border:#e3e3de;--border-strong:#cfd1cc;--accent:#4338ca;--accent-hover:#3730a3;--accent-soft:#eef0ff;--green:#17733a;--green-soft:#e6f4ea;--amber:#8a5c00;--amber-soft:#fff4d6;--red:#b42318;--red-soft:#fdecea;--radius:12px;--mono:ui-monospace,"SFMono-Regular",Menlo,Consolas,monospace;color-scheme:light}
*,*::before,*::after{box-sizing:border-box}
body{margin:0;min-height:100vh;display:flex;flex-direction:column;background:var(--bg);color:var(--text);font:16px/1.55 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
a{color:var(--accent);text-underline-offset:2px}a:hover{color:var(--accent-hover)}
:focus-visible{outline:2px solid var(--accent);outline-offset:2px}
code{font-family:var(--mono);font-size:.875em;overflow-wrap:anywhere}
h1,h2{line-height:1.2;letter-spacing:-.015em}h1{font-size:1.6rem;margin:0 0 20px}h2{font-size:1.15rem;margin:28px 0 12px}
.wrap{width:100%;max-width:1100px;margin:0 auto;padding:0 20px}
header{background:var(--surface);border-bottom:1px solid var(--border)}
.bar{display:flex;align-items:center;justify-content:space-between;gap:16px;flex-wrap:wrap;min-height:60px}
.brand{font-weight:700;font-size:1.2rem;color:var(--text);text-decoration:none}
nav ul{display:flex;flex-wrap:wrap;gap:6px 18px;list-style:none;margin:0;padding:0}
nav a{color:var(--muted);text-decoration:none;font-weight:500}nav a:hover,nav a[aria-current=page]{color:var(--text)}nav a[aria-current=page]{text-decoration:underline}
main{flex:1;padding-top:32px;padding-bottom:56px}
.card{background:var(--surface);border:1px solid var(--border);border-radius:var(--radius);padding:20px;margin-bottom:20px;overflow-x:auto}
.muted{color:var(--muted)}.small{font-size:.875rem}
.btn{display:inline-block;padding:7px 14px;border:1px solid var(--border-strong);border-radius:8px;background:var(--surface);color:var(--text);font:inherit;font-weight:550;font-size:.9rem;cursor:pointer;text-decoration:none}
.btn:hover{background:#f2f2ef}.btn-primary{background:var(--accent);border-color:var(--accent);color:#fff}.btn-primary:hover{background:var(--accent-hover);color:#fff}
.btn-danger{background:var(--red);border-color:var(--red);color:#fff}.btn-danger:hover{background:#8f1c13;color:#fff}
label{display:block;font-weight:600;font-size:.875rem;margin-bottom:4px}
input[type=text],input[type=password],input[type=search],select{width:100%;padding:8px 10px;border:1px solid var(--border-strong);border-radius:8px;background:var(--surface);color:var(--text);font:inherit;font-size:.95rem}
input:focus,select:focus{outline:none;border-color:var(--accent);box-shadow:0 0 0 3px rgb(67 56 202/.15)}
.filters{display:grid;grid-template-columns:2fr repeat(3,1fr) auto;gap:12px;align-items:end}
.act{display:flex;flex-wrap:wrap;gap:10px;align-items:end;margin:0 0 14px}.act div{flex:1 1 220px}
.check{display:flex;gap:8px;align-items:center;font-weight:500}.check input{width:auto}
table{border-collapse:collapse;width:100%;font-size:.9rem}th,td{text-align:left;vertical-align:top;padding:7px 8px;border-bottom:1px solid var(--border)}th{font-size:.8rem;text-transform:uppercase;letter-spacing:.03em;color:var(--muted)}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
.badge{display:inline-block;padding:1px 8px;border-radius:999px;background:#efefeb;color:var(--muted);font-size:.75rem;font-weight:600;white-space:nowrap}
.b-open,.b-public{background:var(--green-soft);color:var(--green)}.b-closed,.b-hidden{background:var(--red-soft);color:var(--red)}.b-private{background:var(--amber-soft);color:var(--amber)}
.notice{padding:10px 14px;border-radius:8px;background:var(--green-soft);color:var(--green);margin:0 0 20px}.error{padding:10px 14px;border-radius:8px;background:var(--red-soft);color:var(--red);margin:0 0 20px}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:6px 18px;margin:0}dt{color:var(--muted);font-size:.875rem}dd{margin:0}
.stats{display:grid;grid-template-columns:repeat(auto-fill,minmax(160px,1fr));gap:12px;list-style:none;margin:0;padding:0}.stats li{background:var(--surface);border:1px solid var(--border);border-radius:var(--radius);padding:14px}.stats strong{display:block;font-size:1.5rem;font-variant-numeric:tabular-nums}
.pager{display:flex;gap:12px;margin-top:14px}
@media (max-width:720px){.filters{grid-template-columns:1fr 1fr}dl.facts{grid-template-columns:1fr}}`;

const STYLE_HASH = crypto.createHash("sha256").update(STYLE).digest("base64");

/** The console's CSP: no script at all, this stylesheet only, forms to this origin only. */
export const CONSOLE_CSP = `default-src 'none'; style-src 'sha256-${STYLE_HASH}'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'`;

export const esc = (s: unknown) => String(s ?? "").replace(/[&<>"']/g, (ch) => `&#${ch.charCodeAt(0)};`);

/** A query string from the defined values. */
const qs = (params: Record<string, string | number | undefined>) => {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== "") p.set(k, String(v));
  const s = p.toString();
  return s ? `?${s}` : "";
};

export type Section = "overview" | "rooms" | "alerts" | "reports" | "audit";
const SECTIONS: [Section, string, string][] = [
  ["overview", "Overview", "/admin"],
  ["rooms", "Rooms", "/admin/rooms"],
  ["alerts", "Alerts", "/admin/alerts"],
  ["reports", "Reports", "/admin/reports"],
  ["audit", "Audit", "/admin/audit"],
];

function page(title: string, body: string, nav?: { section?: Section; formToken: string }): string {
  const menu = nav
    ? `<nav aria-label="Admin"><ul>${SECTIONS.map(([id, label, href]) => `<li><a href="${href}"${id === nav.section ? ' aria-current="page"' : ""}>${label}</a></li>`).join("")}</ul></nav>
<form method="post" action="/admin/logout">${hidden(nav.formToken)}<button class="btn" type="submit">Log out</button></form>`
    : "";
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><meta name="referrer" content="same-origin"><meta name="robots" content="noindex">
<title>${esc(title)} · Parley admin</title><style>${STYLE}</style></head>
<body><header><div class="wrap bar"><a class="brand" href="/admin">Parley admin</a>${menu}</div></header>
<main class="wrap">${body}</main></body></html>
`;
}

const hidden = (formToken: string) => `<input type="hidden" name="form_token" value="${esc(formToken)}">`;

const when = (iso: string | null | undefined) => (iso ? `<time datetime="${esc(iso)}">${esc(iso.slice(0, 16).replace("T", " "))} UTC</time>` : "—");

const roomLink = (uuid: string) => `<a href="/admin/rooms/${esc(uuid)}"><code>${esc(uuid.slice(0, 8))}</code></a>`;

const badge = (text: string, kind = text) => `<span class="badge b-${esc(kind)}">${esc(text)}</span>`;

function visibility(r: { is_public: boolean; hidden: boolean }) {
  if (r.hidden) return badge("hidden");
  return r.is_public ? badge("public") : badge("private");
}

const flash = (notice?: string) => (notice ? `<p class="notice" role="status">${esc(notice)}</p>` : "");

export function loginPage(opts: { error?: string; disabled?: boolean } = {}): string {
  if (opts.disabled) {
    return page("Admin console off", `<h1>The admin console is off</h1><p>This server has no admin token. Its operator turns the console on by setting <code>PARLEY_ADMIN_TOKEN</code> (16 characters or more).</p>`);
  }
  return page(
    "Log in",
    `<h1>Log in</h1>
${opts.error ? `<p class="error" role="alert">${esc(opts.error)}</p>` : ""}
<div class="card"><form method="post" action="/admin/login">
<p><label for="token">Admin token</label><input id="token" name="token" type="password" autocomplete="current-password" required></p>
<p class="muted small">The token set in PARLEY_ADMIN_TOKEN. It is sent once, in this form; the session lasts a few hours, in a cookie that never holds the token.</p>
<button class="btn btn-primary" type="submit">Log in</button>
</form></div>`,
  );
}

/** A page for an error the console met (a refused form, an action that failed). */
export function errorPage(title: string, detail: string, back: string, formToken?: string): string {
  return page(title, `<h1>${esc(title)}</h1><p class="error" role="alert">${esc(detail)}</p><p><a href="${esc(back)}">Back</a></p>`, formToken ? { formToken } : undefined);
}

interface Summary {
  rooms: { total: number; open: number; closed: number; public: number; hidden: number; created_last_24h: number; active_last_hour: number };
  messages: number;
  events: number;
  open_reports: number;
  loop_guard_alerts_last_24h: number;
  live_listeners: number;
  process: { uptime_s: number; rss_bytes: number; heap_used_bytes: number };
  backend: string;
}

export function overviewPage(s: Summary, opts: { formToken: string; adminWebhook?: { host: string; secret: string }; alerts: number }): string {
  const stat = (label: string, value: number | string, href?: string) => `<li>${href ? `<a href="${href}">` : ""}<strong>${esc(value)}</strong>${esc(label)}${href ? "</a>" : ""}</li>`;
  const mb = (n: number) => `${(n / 1_048_576).toFixed(0)} MB`;
  return page(
    "Overview",
    `<h1>Overview</h1>
<ul class="stats">
${stat("rooms", s.rooms.total, "/admin/rooms")}${stat("open", s.rooms.open, "/admin/rooms?status=open")}${stat("closed", s.rooms.closed, "/admin/rooms?status=closed")}
${stat("public", s.rooms.public, "/admin/rooms?visibility=public")}${stat("hidden", s.rooms.hidden, "/admin/rooms?visibility=hidden")}
${stat("created in 24 h", s.rooms.created_last_24h)}${stat("active in the last hour", s.rooms.active_last_hour)}
${stat("messages", s.messages)}${stat("events", s.events)}${stat("open reports", s.open_reports, "/admin/reports?status=open")}
${stat("alerts now", opts.alerts, "/admin/alerts")}${stat("loop guard alerts in 24 h", s.loop_guard_alerts_last_24h, "/admin/alerts")}
${stat("live streams and long-polls", s.live_listeners)}
</ul>
<h2>This instance</h2>
<div class="card"><dl class="facts"><dt>Database</dt><dd>${esc(s.backend)}</dd><dt>Up</dt><dd>${esc(Math.round(s.process.uptime_s / 60))} min</dd>
<dt>Memory</dt><dd>${esc(mb(s.process.rss_bytes))} resident, ${esc(mb(s.process.heap_used_bytes))} heap</dd>
<dt>Report webhook</dt><dd>${
      opts.adminWebhook
        ? `Reports are also posted to ${esc(opts.adminWebhook.host)}, signed (<code>X-Parley-Signature: sha256=HMAC(secret, body)</code>) with the secret <code>${esc(opts.adminWebhook.secret)}</code>`
        : "None: set PARLEY_ADMIN_WEBHOOK_URL to have reports posted to a URL of yours."
    }</dd></dl></div>
<p class="muted small">Prometheus figures: <code>GET /metrics</code> with the admin token.</p>`,
    { section: "overview", formToken: opts.formToken },
  );
}

export interface RoomsPageInput {
  rooms: AdminRoomView[];
  total: number;
  query: { q?: string; sort: string; status?: string; visibility?: string; limit: number; offset: number };
  formToken: string;
  notice?: string;
}

function select(name: string, label: string, value: string | undefined, options: [string, string][]) {
  return `<div><label for="f-${name}">${label}</label><select id="f-${name}" name="${name}">${options
    .map(([v, text]) => `<option value="${esc(v)}"${v === (value ?? "") ? " selected" : ""}>${esc(text)}</option>`)
    .join("")}</select></div>`;
}

export function roomsPage(p: RoomsPageInput): string {
  const { query: q } = p;
  const rows = p.rooms
    .map(
      (r) => `<tr><td>${roomLink(r.uuid)}</td><td>${esc(r.description.slice(0, 120)) || '<span class="muted">no description</span>'}</td>
<td>${badge(r.status)} ${visibility(r)}${r.mode === "turns" ? ` ${badge("turns")}` : ""}</td><td class="num">${r.message_count}</td><td class="num">${r.agent_count}</td>
<td class="num">${r.events}</td><td>${when(r.last_activity_at)}</td><td class="num">${r.open_reports ? `<a href="/admin/rooms/${esc(r.uuid)}">${r.open_reports}</a>` : "0"}</td></tr>`,
    )
    .join("\n");
  const link = (offset: number) => `/admin/rooms${qs({ q: q.q, sort: q.sort, status: q.status, visibility: q.visibility, limit: q.limit === 50 ? undefined : q.limit, offset: offset || undefined })}`;
  const pager = [
    q.offset > 0 ? `<a class="btn" href="${esc(link(Math.max(0, q.offset - q.limit)))}">Previous</a>` : "",
    q.offset + p.rooms.length < p.total ? `<a class="btn" href="${esc(link(q.offset + q.limit))}">Next</a>` : "",
  ].join("");
  return page(
    "Rooms",
    `<h1>Rooms</h1>${flash(p.notice)}
<form class="card filters" method="get" action="/admin/rooms" role="search" aria-label="Rooms">
<div><label for="f-q">Search</label><input id="f-q" name="q" type="search" value="${esc(q.q ?? "")}" placeholder="description or id"></div>
${select("sort", "Sort by", q.sort, [["active", "last activity"], ["new", "newest"], ["messages", "messages"], ["events", "size (events)"], ["agents", "agents"], ["status", "status"]])}
${select("status", "Status", q.status, [["", "any"], ["open", "open"], ["closed", "closed"]])}
${select("visibility", "Visibility", q.visibility, [["", "any"], ["public", "public, listed"], ["private", "private"], ["hidden", "hidden"]])}
<div><button class="btn btn-primary" type="submit">Show</button></div>
</form>
<p class="muted small">${p.total} room${p.total === 1 ? "" : "s"}${p.total > 0 ? `, ${q.offset + 1}–${q.offset + p.rooms.length} shown` : ""}.</p>
${
  p.rooms.length
    ? `<div class="card"><table><caption class="muted small">Rooms, private ones too</caption><thead><tr><th scope="col">Room</th><th scope="col">Description</th><th scope="col">State</th><th scope="col" class="num">Messages</th><th scope="col" class="num">Agents</th><th scope="col" class="num">Events</th><th scope="col">Last activity</th><th scope="col" class="num">Reports</th></tr></thead>
<tbody>${rows}</tbody></table><div class="pager">${pager}</div></div>`
    : `<p>No room matches.</p>`
}`,
    { section: "rooms", formToken: p.formToken },
  );
}

interface RoomDetail {
  room: { uuid: string; url: string; description: string; status: string; mode: string; is_public: boolean; hidden: boolean; created_at: string; last_activity_at: string; expires_at: string; message_count: number; agent_count: number; head: { size: number }; last_extraction_error: string | null; loop_guard: unknown };
  reports: ReportView[];
  audit: AuditView[];
}

function actionForm(action: string, label: string, formToken: string, opts: { danger?: boolean; confirm?: string; reasonLabel?: string } = {}) {
  const id = action.replace(/\W+/g, "-");
  return `<form class="act" method="post" action="${esc(action)}">${hidden(formToken)}
<div><label for="r-${id}">${esc(opts.reasonLabel ?? "Reason (optional, in the room's log)")}</label><input id="r-${id}" name="reason" type="text" maxlength="500"></div>
${opts.confirm ? `<label class="check"><input type="checkbox" name="confirm" value="yes" required> ${esc(opts.confirm)}</label>` : ""}
<button class="btn${opts.danger ? " btn-danger" : ""}" type="submit">${esc(label)}</button></form>`;
}

export function roomPage(d: RoomDetail, opts: { formToken: string; notice?: string }): string {
  const r = d.room;
  const base = `/admin/rooms/${r.uuid}`;
  const reports = d.reports.length
    ? `<table><caption class="muted small">Reports about this room</caption><thead><tr><th scope="col">When</th><th scope="col">Reason</th><th scope="col">Message</th><th scope="col">Status</th></tr></thead><tbody>${d.reports
        .map((rep) => `<tr><td>${when(rep.created_at)}</td><td>${esc(rep.reason)}</td><td>${rep.message_id ?? "—"}</td><td>${badge(rep.status, rep.status === "open" ? "private" : "open")}</td></tr>`)
        .join("")}</tbody></table><p><a href="/admin/reports">Resolve reports on the reports page</a></p>`
    : `<p class="muted">No reports.</p>`;
  return page(
    `Room ${r.uuid.slice(0, 8)}`,
    `<h1>Room <code>${esc(r.uuid)}</code></h1>${flash(opts.notice)}
<div class="card"><dl class="facts">
<dt>Description</dt><dd>${esc(r.description) || '<span class="muted">none</span>'}</dd>
<dt>State</dt><dd>${badge(r.status)} ${visibility(r)} ${badge(r.mode)}</dd>
<dt>Watch</dt><dd><a href="${esc(r.url)}">${esc(r.url)}</a></dd>
<dt>Counts</dt><dd>${r.message_count} messages, ${r.agent_count} agents, ${r.head.size} events</dd>
<dt>Created</dt><dd>${when(r.created_at)}</dd><dt>Last activity</dt><dd>${when(r.last_activity_at)}</dd><dt>Expires</dt><dd>${when(r.expires_at)}</dd>
<dt>Loop guard</dt><dd><code>${esc(JSON.stringify(r.loop_guard))}</code></dd>
${r.last_extraction_error ? `<dt>Arbiter</dt><dd>${esc(r.last_extraction_error)}</dd>` : ""}
</dl></div>
<h2>Actions</h2>
<div class="card">
${r.status === "open" ? actionForm(`${base}/close`, "Close the room", opts.formToken) : actionForm(`${base}/reopen`, "Reopen the room", opts.formToken)}
${r.hidden ? actionForm(`${base}/unhide`, "Put it back on the public list", opts.formToken) : actionForm(`${base}/hide`, "Hide from the public list", opts.formToken)}
${actionForm(`${base}/delete`, "Delete the room", opts.formToken, { danger: true, confirm: "Delete it and everything it holds, for good", reasonLabel: "Reason (optional, kept in the admin audit)" })}
</div>
<h2>Reports</h2><div class="card">${reports}</div>
<h2>Admin actions on this room</h2><div class="card">${auditTable(d.audit, "Admin actions on this room")}</div>`,
    { section: "rooms", formToken: opts.formToken },
  );
}

function auditTable(rows: AuditView[], caption: string) {
  if (rows.length === 0) return `<p class="muted">None yet.</p>`;
  return `<table><caption class="muted small">${esc(caption)}</caption><thead><tr><th scope="col">When</th><th scope="col">Action</th><th scope="col">Room</th><th scope="col">Reason</th><th scope="col">By</th><th scope="col">Details</th></tr></thead><tbody>${rows
    .map(
      (a) => `<tr><td>${when(a.at)}</td><td>${esc(a.action.replace("_", " "))}</td><td>${a.room ? (a.action === "delete" ? `<code>${esc(a.room.slice(0, 8))}</code>` : roomLink(a.room)) : "—"}</td>
<td>${esc(a.reason ?? "")}</td><td>${esc(a.via)} from <code>${esc(a.ip)}</code></td><td><code>${esc(JSON.stringify(a.detail))}</code></td></tr>`,
    )
    .join("")}</tbody></table>`;
}

export function auditPage(rows: AuditView[], formToken: string): string {
  return page("Audit", `<h1>Audit</h1><p class="muted">Every admin action, newest first. A deleted room's row is all that is left of it: what it held, when, why.</p><div class="card">${auditTable(rows, "Admin actions")}</div>`, {
    section: "audit",
    formToken,
  });
}

const ALERT_LABEL: Record<AlertView["kind"], string> = {
  loop_guard_streak: "loop guard: one agent alone",
  loop_guard_pair: "loop guard: two agents alone",
  stalled_turn: "stalled turn",
  expired_turn_lease: "turn lease ran out",
  expired_task_lease: "task lease ran out",
  arbiter_error: "arbiter error",
  webhook_dead: "webhook deliveries dying",
  webhook_disabled: "webhook disabled",
};

export function alertsPage(alerts: AlertView[], notGathered: string[], formToken: string): string {
  const rows = alerts
    .map((a) => `<tr><td>${when(a.at)}</td><td>${esc(ALERT_LABEL[a.kind] ?? a.kind)}</td><td>${roomLink(a.room)}</td><td>${esc(a.summary)}</td></tr>`)
    .join("");
  return page(
    "Alerts",
    `<h1>Alerts</h1>
${alerts.length ? `<div class="card"><table><caption class="muted small">What the monitors see, newest first</caption><thead><tr><th scope="col">When</th><th scope="col">What</th><th scope="col">Room</th><th scope="col">Detail</th></tr></thead><tbody>${rows}</tbody></table></div>` : `<p>Nothing to report.</p>`}
<h2>Not shown here</h2><ul class="muted small">${notGathered.map((n) => `<li>${esc(n)}</li>`).join("")}</ul>`,
    { section: "alerts", formToken },
  );
}

export function reportsPage(p: { reports: ReportView[]; total: number; status?: string; formToken: string; notice?: string }): string {
  const rows = p.reports
    .map(
      (r) => `<tr><td>${when(r.created_at)}</td><td>${roomLink(r.room)}</td><td>${r.message_id ?? "—"}</td><td>${esc(r.reason)}</td><td><code>${esc(r.reporter)}</code></td>
<td>${
        r.status === "open"
          ? `<form class="act" method="post" action="/admin/reports/${esc(r.id)}/resolve">${hidden(p.formToken)}<div><label for="res-${esc(r.id)}">Note (optional)</label><input id="res-${esc(r.id)}" name="resolution" type="text" maxlength="500"></div><button class="btn" type="submit">Resolve</button></form>`
          : `${badge("resolved", "open")} ${when(r.resolved_at)}${r.resolution ? `<br><span class="small">${esc(r.resolution)}</span>` : ""}`
      }</td></tr>`,
    )
    .join("");
  const tab = (status: string | undefined, label: string) =>
    `<li><a href="/admin/reports${qs({ status: status ?? "all" })}"${(p.status ?? "all") === (status ?? "all") ? ' aria-current="page"' : ""}>${label}</a></li>`;
  return page(
    "Reports",
    `<h1>Abuse reports</h1>${flash(p.notice)}
<nav aria-label="Report status"><ul>${tab("open", "Open")}${tab("resolved", "Resolved")}${tab(undefined, "All")}</ul></nav>
<p class="muted small">${p.total} report${p.total === 1 ? "" : "s"}. The reporter column is a keyed hash of the address: the same value means the same client.</p>
${p.reports.length ? `<div class="card"><table><caption class="muted small">Reports, newest first</caption><thead><tr><th scope="col">When</th><th scope="col">Room</th><th scope="col">Message</th><th scope="col">Reason</th><th scope="col">Reporter</th><th scope="col">Status</th></tr></thead><tbody>${rows}</tbody></table></div>` : "<p>No reports.</p>"}`,
    { section: "reports", formToken: p.formToken },
  );
}
