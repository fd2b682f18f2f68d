import type { Context } from "hono";
import { closeRoomAsAdmin, deleteRoomAsAdmin, reopenRoomAsAdmin, resolveReport, setRoomHidden } from "../../lib/admin/actions";
import type { AdminActor } from "../../lib/admin/audit";
import {
  clearedCookie, formToken, formTokenMatches, isAdminToken, isHttps, newSession, readSession, requireAdminToken, sameOrigin, sessionCookie, type Session,
} from "../../lib/admin/auth";
import { alertsPage, auditPage, CONSOLE_CSP, errorPage, loginPage, overviewPage, reportsPage, roomPage, roomsPage } from "../../lib/admin/pages";
import { adminRoom, adminSummary, gatherAlerts, listAdminRooms, listAudit, listReports } from "../../lib/admin/queries";
import { adminWebhookSecret } from "../../lib/admin/reports";
import { actionBody, adminRoomsQuery, auditQuery, reportsQuery, resolveBody } from "../../lib/admin/schemas";
import { ParleyError, validationError } from "../../lib/errors";
import { parseRoomId } from "../../lib/services/access";
import type { Services } from "../../lib/services/context";
import type { z } from "zod";
import { bearer, jsonBody, queryOf, type App, type Env } from "../http";

/**
 * The operator's doors: the JSON API under /api/admin/* (Authorization: Bearer <admin token>) and
 * the console under /admin (a session cookie from POST /admin/login; every POST checked for its
 * Origin and its session's form token). Both call the same services (lib/admin).
 */
export function adminRoutes(app: App, svc: Services): void {
  // A token in a URL ends up in logs, histories and Referer headers: never read, and said so.
  const noUrlTokens = async (c: Context<Env>, next: () => Promise<void>) => {
    if (c.req.query("token") !== undefined) {
      throw new ParleyError("bad_request", "Tokens are never read from a URL. Send Authorization: Bearer <admin token>, or log in with the form at /admin.");
    }
    await next();
  };
  app.use("/api/admin/*", noUrlTokens);
  app.use("/admin", noUrlTokens);
  app.use("/admin/*", noUrlTokens);
  adminApi(app, svc);
  adminConsole(app, svc);
}

// ---------- JSON ----------

function adminApi(app: App, svc: Services): void {
  /** The admin token as a Bearer token; ids in the path are checked first (400 invalid_uuid says nothing about access). */
  const admin = (c: Context<Env>): AdminActor => {
    requireAdminToken(svc, bearer(c));
    return { via: "api", ip: c.get("caller").ip };
  };

  app.get("/api/admin/summary", async (c) => {
    admin(c);
    return c.json(await adminSummary(svc));
  });
  app.get("/api/admin/rooms", async (c) => {
    admin(c);
    return c.json(await listAdminRooms(svc, c.get("caller"), filledQuery(c, adminRoomsQuery)));
  });
  app.get("/api/admin/rooms/:id", async (c) => {
    const id = parseRoomId(c.req.param("id") ?? "");
    admin(c);
    return c.json(await adminRoom(svc, c.get("caller"), id));
  });

  const roomAction = (name: string, run: (c: Context<Env>, actor: AdminActor, id: string, reason?: string) => Promise<unknown>) =>
    app.post(`/api/admin/rooms/:id/${name}`, async (c) => {
      const id = parseRoomId(c.req.param("id") ?? "");
      const actor = admin(c);
      const { reason } = await jsonBody(c, actionBody);
      return c.json(await run(c, actor, id, reason));
    });
  roomAction("close", (c, actor, id, reason) => closeRoomAsAdmin(svc, c.get("caller"), actor, id, reason));
  roomAction("reopen", (c, actor, id, reason) => reopenRoomAsAdmin(svc, c.get("caller"), actor, id, reason));
  roomAction("hide", (c, actor, id, reason) => setRoomHidden(svc, c.get("caller"), actor, id, true, reason));
  roomAction("unhide", (c, actor, id, reason) => setRoomHidden(svc, c.get("caller"), actor, id, false, reason));
  roomAction("delete", (_c, actor, id, reason) => deleteRoomAsAdmin(svc, actor, id, reason));
  app.delete("/api/admin/rooms/:id", async (c) => {
    const id = parseRoomId(c.req.param("id") ?? "");
    return c.json(await deleteRoomAsAdmin(svc, admin(c), id));
  });

  app.get("/api/admin/reports", async (c) => {
    admin(c);
    return c.json(await listReports(svc, filledQuery(c, reportsQuery)));
  });
  app.post("/api/admin/reports/:rid/resolve", async (c) => {
    const actor = admin(c);
    const { resolution } = await jsonBody(c, resolveBody);
    return c.json(await resolveReport(svc, actor, c.req.param("rid") ?? "", resolution));
  });
  app.get("/api/admin/alerts", async (c) => {
    admin(c);
    return c.json(await gatherAlerts(svc));
  });
  app.get("/api/admin/audit", async (c) => {
    admin(c);
    return c.json(await listAudit(svc, queryOf(c, auditQuery).limit));
  });
}

// ---------- the console ----------

/** Sentences for the `done` notice after an action (a code, never text from the URL). */
const DONE: Record<string, string> = {
  close: "The room is closed.",
  reopen: "The room is open again.",
  hide: "The room is off the public list.",
  unhide: "The room is back on the public list.",
  deleted: "The room was deleted; the audit keeps the record.",
  resolved: "The report is resolved.",
};

function adminConsole(app: App, svc: Services): void {
  const headers = { "Content-Security-Policy": CONSOLE_CSP, "Cache-Control": "no-store", "X-Frame-Options": "DENY" };
  const html = (c: Context<Env>, body: string, status = 200) => c.html(body, status as 200, headers);
  const secure = (c: Context<Env>) => isHttps(svc.config, { forwardedProto: c.req.header("x-forwarded-proto") });
  const session = (c: Context<Env>) => readSession(svc, c.req.header("cookie"));
  const toLogin = (c: Context<Env>) => c.redirect("/admin", 303);
  const notice = (c: Context<Env>) => DONE[c.req.query("done") ?? ""];
  const off = (c: Context<Env>) => html(c, loginPage({ disabled: true }), 404);

  /** A console page: the session's, else back to the login form. */
  const view = (path: string, render: (c: Context<Env>, s: Session, token: string) => Promise<string>) =>
    app.get(path, async (c) => {
      if (!svc.config.adminToken) return off(c);
      const s = session(c);
      if (!s) return toLogin(c);
      const token = formToken(svc, s);
      try {
        return html(c, await render(c, s, token));
      } catch (err) {
        if (err instanceof ParleyError) return html(c, errorPage("Not available", err.detail, "/admin", token), err.status);
        throw err;
      }
    });

  /**
   * A console form post: from a page of this origin (Origin), with a session, carrying that
   * session's form token; then `run`, and a redirect to where it says (303, so a reload does not
   * post again).
   */
  const action = (path: string, run: (c: Context<Env>, form: Record<string, string>, actor: AdminActor) => Promise<string>) =>
    app.post(path, async (c) => {
      if (!svc.config.adminToken) return off(c);
      const origins = { origin: c.req.header("origin"), host: c.req.header("host"), forwardedProto: c.req.header("x-forwarded-proto"), fetchSite: c.req.header("sec-fetch-site") };
      if (!sameOrigin(svc.config, origins)) {
        return html(c, errorPage("Refused", "This form was not sent from a page of this server (its Origin does not match), so it was refused. Use the console's own pages.", "/admin"), 403);
      }
      const s = session(c);
      if (!s) return html(c, errorPage("Not logged in", "Your session has ended or was never started. Log in again.", "/admin"), 403);
      const form = await formFields(c);
      const token = formToken(svc, s);
      if (!formTokenMatches(svc, s, form.form_token)) {
        return html(c, errorPage("Refused", "This form's token does not belong to your session (the page is out of date, or the form is not the console's). Reload the page and try again.", "/admin", token), 403);
      }
      try {
        return c.redirect(await run(c, form, { via: "console", ip: c.get("caller").ip }), 303);
      } catch (err) {
        if (err instanceof ParleyError) return html(c, errorPage("Not done", err.detail, "/admin", token), err.status);
        throw err;
      }
    });

  app.get("/admin", async (c) => {
    if (!svc.config.adminToken) return off(c);
    const s = session(c);
    if (!s) return html(c, loginPage());
    const [summary, { alerts }] = await Promise.all([adminSummary(svc), gatherAlerts(svc)]);
    const hook = svc.config.adminWebhookUrl ? { host: new URL(svc.config.adminWebhookUrl).host, secret: adminWebhookSecret(svc) } : undefined;
    return html(c, overviewPage(summary, { formToken: formToken(svc, s), adminWebhook: hook, alerts: alerts.length }));
  });

  app.post("/admin/login", async (c) => {
    if (!svc.config.adminToken) return off(c);
    const origins = { origin: c.req.header("origin"), host: c.req.header("host"), forwardedProto: c.req.header("x-forwarded-proto"), fetchSite: c.req.header("sec-fetch-site") };
    if (!sameOrigin(svc.config, origins)) return html(c, loginPage({ error: "This form was not sent from this server's login page, so it was refused." }), 403);
    try {
      // Guessing the token is slow: a few tries per address per quarter of an hour.
      await svc.limiter.take(`admin-login:${c.get("caller").ip}`, 10, 15 * 60_000, "login attempts from your address");
    } catch (err) {
      if (err instanceof ParleyError) {
        c.header("Retry-After", String(err.extra.retryAfter ?? 60));
        return html(c, loginPage({ error: err.detail }), err.status);
      }
      throw err;
    }
    const { token } = await formFields(c);
    if (!isAdminToken(svc, token)) return html(c, loginPage({ error: "That is not the admin token of this server." }), 403);
    const { value } = newSession(svc);
    c.header("Set-Cookie", sessionCookie(value, svc.config.adminSessionTtlMs, secure(c)));
    return c.redirect("/admin", 303);
  });

  app.post("/admin/logout", async (c) => {
    const origins = { origin: c.req.header("origin"), host: c.req.header("host"), forwardedProto: c.req.header("x-forwarded-proto"), fetchSite: c.req.header("sec-fetch-site") };
    const s = session(c);
    const form = await formFields(c);
    // Logging out is refused to other sites' pages too: it is a state change like any other.
    if (!sameOrigin(svc.config, origins) || !s || !formTokenMatches(svc, s, form.form_token)) {
      return html(c, errorPage("Refused", "This logout was not sent by a console page of your session.", "/admin"), 403);
    }
    c.header("Set-Cookie", clearedCookie(secure(c)));
    return c.redirect("/admin", 303);
  });

  view("/admin/rooms", async (c, _s, token) => {
    const query = filledQuery(c, adminRoomsQuery);
    const { rooms, total } = await listAdminRooms(svc, c.get("caller"), query);
    return roomsPage({ rooms, total, query, formToken: token, notice: notice(c) });
  });
  view("/admin/rooms/:id", async (c, _s, token) => roomPage(await adminRoom(svc, c.get("caller"), c.req.param("id") ?? ""), { formToken: token, notice: notice(c) }));
  view("/admin/alerts", async (_c, _s, token) => {
    const { alerts, not_gathered } = await gatherAlerts(svc);
    return alertsPage(alerts, not_gathered, token);
  });
  view("/admin/reports", async (c, _s, token) => {
    const raw = c.req.query("status");
    const parsed = reportsQuery.safeParse({ ...filled(c), status: raw === "all" ? undefined : raw || "open" });
    if (!parsed.success) throw validationError(parsed.error, "query");
    const { reports, total } = await listReports(svc, parsed.data);
    return reportsPage({ reports, total, status: parsed.data.status, formToken: token, notice: notice(c) });
  });
  view("/admin/audit", async (_c, _s, token) => auditPage((await listAudit(svc, 200)).audit, token));

  const reasonOf = (form: Record<string, string>) => {
    const parsed = actionBody.safeParse({ reason: form.reason ?? "" });
    if (!parsed.success) throw validationError(parsed.error, "form");
    return parsed.data.reason;
  };
  const roomBack = (id: string, done: string) => `/admin/rooms/${id}?done=${done}`;
  for (const name of ["close", "reopen", "hide", "unhide"] as const) {
    action(`/admin/rooms/:id/${name}`, async (c, form, actor) => {
      const id = parseRoomId(c.req.param("id") ?? "");
      const reason = reasonOf(form);
      if (name === "close") await closeRoomAsAdmin(svc, c.get("caller"), actor, id, reason);
      else if (name === "reopen") await reopenRoomAsAdmin(svc, c.get("caller"), actor, id, reason);
      else await setRoomHidden(svc, c.get("caller"), actor, id, name === "hide", reason);
      return roomBack(id, name);
    });
  }
  action("/admin/rooms/:id/delete", async (c, form, actor) => {
    const id = parseRoomId(c.req.param("id") ?? "");
    if (form.confirm !== "yes") throw new ParleyError("validation_error", "Tick the box that confirms the deletion: it removes the room and everything it holds, for good.");
    await deleteRoomAsAdmin(svc, actor, id, reasonOf(form));
    return "/admin/rooms?done=deleted";
  });
  action("/admin/reports/:rid/resolve", async (c, form, actor) => {
    const parsed = resolveBody.safeParse({ resolution: form.resolution ?? "" });
    if (!parsed.success) throw validationError(parsed.error, "form");
    await resolveReport(svc, actor, c.req.param("rid") ?? "", parsed.data.resolution);
    return "/admin/reports?done=resolved";
  });
}

/** The query's parameters that have a value: a form's "any" choice sends an empty one. */
const filled = (c: Context<Env>) => Object.fromEntries(Object.entries(c.req.query()).filter(([, v]) => v !== ""));

function filledQuery<T extends z.ZodType>(c: Context<Env>, schema: T): z.output<T> {
  const parsed = schema.safeParse(filled(c));
  if (!parsed.success) throw validationError(parsed.error, "query");
  return parsed.data;
}

/** A form post's text fields (urlencoded or multipart); anything else is none. */
async function formFields(c: Context<Env>): Promise<Record<string, string>> {
  const type = c.req.header("content-type") ?? "";
  if (!/^(application\/x-www-form-urlencoded|multipart\/form-data)/i.test(type)) return {};
  const body = await c.req.parseBody();
  return Object.fromEntries(Object.entries(body).filter((e): e is [string, string] => typeof e[1] === "string"));
}
