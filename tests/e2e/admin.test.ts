/**
 * The admin console in real Chromium: log in with the form, find a private room, delete it, log
 * out; a form on another origin posting to the console is refused; the watcher's "Report this
 * room" reaches the operator; and every console page passes axe's WCAG A/AA rules.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo } from "node:net";
import type { Browser } from "playwright-core";
import { A11Y_VIEWPORTS, axeViolations, formatFindings, openPage, startBrowserFixture, type A11yFinding, type BrowserFixture, type JsonApi } from "../helpers/browser";
import type { RunningServer } from "../../server";

const ADMIN = "admin-token-for-the-browser-tests";
let fx: BrowserFixture;
let running: RunningServer;
let browser: Browser;
let api: JsonApi;

before(
  async () => {
    fx = await startBrowserFixture({ env: { PARLEY_ADMIN_TOKEN: ADMIN } });
    ({ running, browser, api } = fx);
  },
  { timeout: 600_000 },
);
after(async () => {
  await fx?.close();
});

const adminApi = <T = any>(path: string, body?: unknown) => api<T>(path, body, { token: ADMIN });

/** A session cookie got as a browser gets one (the login form's POST), for pages opened with it. */
async function sessionCookie(): Promise<string> {
  const res = await fetch(`${running.url}/admin/login`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded", origin: running.url },
    body: new URLSearchParams({ token: ADMIN }).toString(),
    redirect: "manual",
  });
  assert.equal(res.status, 303);
  return res.headers.getSetCookie()[0]!.split(";")[0]!;
}

test("log in, find a private room, delete it, log out", async () => {
  const tag = `browser-admin-${Date.now()}`;
  const room = await api<{ uuid: string }>("/api/rooms", { description: `${tag} private room` });
  await api(`/api/rooms/${room.uuid}/messages`, { agent_id: "ann", text: "hello" });
  const { page, problems } = await openPage(browser, running.url);
  try {
    await page.goto("/admin");
    await page.getByLabel("Admin token").fill(ADMIN);
    await page.getByRole("button", { name: "Log in" }).click();
    await page.getByRole("heading", { name: "Overview" }).waitFor();
    const cookie = (await page.context().cookies()).find((c) => c.name === "parley_admin")!;
    assert.deepEqual([cookie.httpOnly, cookie.sameSite, cookie.path], [true, "Strict", "/admin"]);

    await page.getByRole("navigation", { name: "Admin" }).getByRole("link", { name: "Rooms" }).click();
    await page.getByLabel("Search").fill(tag);
    await page.getByLabel("Visibility").selectOption("private");
    await page.getByRole("button", { name: "Show" }).click();
    const rows = page.locator("tbody tr");
    await rows.first().waitFor();
    assert.equal(await rows.count(), 1);
    assert.match((await rows.first().textContent())!, new RegExp(`${tag} private room`));
    await rows.first().getByRole("link").first().click();
    await page.getByRole("heading", { name: `Room ${room.uuid}` }).waitFor();

    await page.getByLabel("Reason (optional, kept in the admin audit)").fill("test deletion");
    await page.getByLabel("Delete it and everything it holds, for good").check();
    await page.getByRole("button", { name: "Delete the room" }).click();
    await page.getByRole("status").filter({ hasText: "The room was deleted" }).waitFor();
    const gone = await fetch(`${running.url}/api/rooms/${room.uuid}`);
    assert.equal(gone.status, 404);
    const audit = await adminApi<{ audit: any[] }>("/api/admin/audit");
    const row = audit.audit.find((a) => a.room === room.uuid)!;
    assert.deepEqual([row.action, row.via, row.reason, row.detail.messages], ["delete", "console", "test deletion", 1]);

    await page.getByRole("button", { name: "Log out" }).click();
    await page.getByLabel("Admin token").waitFor();
    assert.equal((await page.context().cookies()).filter((c) => c.name === "parley_admin").length, 0, "the cookie is gone");
    await page.goto("/admin/rooms");
    await page.getByLabel("Admin token").waitFor();
    assert.equal(new URL(page.url()).pathname, "/admin", "pages send to the login form again");
    assert.deepEqual(problems, []);
  } finally {
    await page.close();
  }
});

test("a form on another origin that posts to the console is refused, even with the session's cookie and form token", async () => {
  const room = await api<{ uuid: string }>("/api/rooms", {});
  const cookie = await sessionCookie();
  const html = await (await fetch(`${running.url}/admin/rooms/${room.uuid}`, { headers: { cookie } })).text();
  const token = /name="form_token" value="([^"]+)"/.exec(html)![1]!;
  // Another origin (another port of the same host: the same site, so the SameSite cookie is sent
  // and only the Origin check stands between the form and the action).
  const evil = http.createServer((_req, res) => {
    res.writeHead(200, { "content-type": "text/html" });
    res.end(`<!doctype html><form method="post" action="${running.url}/admin/rooms/${room.uuid}/close"><input type="hidden" name="form_token" value="${token}"><button>Win a prize</button></form>`);
  });
  await new Promise<void>((resolve) => evil.listen(0, "127.0.0.1", resolve));
  const { page } = await openPage(browser, running.url);
  try {
    const [name, value] = cookie.split("=") as [string, string];
    await page.context().addCookies([{ name, value, url: `${running.url}/admin`, httpOnly: true, sameSite: "Strict" }]);
    await page.goto(`http://127.0.0.1:${(evil.address() as AddressInfo).port}/`);
    const [answer] = await Promise.all([page.waitForResponse((r) => r.url().endsWith(`/admin/rooms/${room.uuid}/close`)), page.getByRole("button", { name: "Win a prize" }).click()]);
    assert.equal(answer.status(), 403);
    assert.equal(answer.request().headers().origin, `http://127.0.0.1:${(evil.address() as AddressInfo).port}`);
    await page.getByRole("heading", { name: "Refused" }).waitFor();
    const info = await api<{ status: string }>(`/api/rooms/${room.uuid}`);
    assert.equal(info.status, "open", "the room was not closed");
  } finally {
    await page.close();
    await new Promise((resolve) => evil.close(resolve));
  }
});

test("the console's own forms post with their Origin: closing a room from its page works", async () => {
  const room = await api<{ uuid: string }>("/api/rooms", {});
  const { page, problems } = await openPage(browser, running.url);
  try {
    await page.goto("/admin");
    await page.getByLabel("Admin token").fill(ADMIN);
    await page.getByRole("button", { name: "Log in" }).click();
    await page.getByRole("heading", { name: "Overview" }).waitFor();
    await page.goto(`/admin/rooms/${room.uuid}`);
    const [sent] = await Promise.all([page.waitForRequest((r) => r.method() === "POST" && r.url().endsWith("/close")), page.getByRole("button", { name: "Close the room" }).click()]);
    assert.equal(sent.headers().origin, running.url, "the page's referrer policy keeps the Origin header (no-referrer would send null)");
    await page.getByRole("status").filter({ hasText: "The room is closed." }).waitFor();
    assert.equal((await api<{ status: string }>(`/api/rooms/${room.uuid}`)).status, "closed");
    assert.deepEqual(problems, []);
  } finally {
    await page.close();
  }
});

test("Report this room, on the watcher page, reaches the operator", async () => {
  const room = await api<{ uuid: string }>("/api/rooms", { description: "to report" });
  const { id } = await api<{ id: number }>(`/api/rooms/${room.uuid}/messages`, { agent_id: "ann", text: "rude" });
  const { page, problems } = await openPage(browser, running.url);
  try {
    await page.goto(`/${room.uuid}`);
    await page.getByText("Report this room").click();
    await page.getByLabel("What is wrong here?").fill("Rude and off-topic.");
    await page.getByLabel("Message number (optional)").fill(String(id));
    await page.getByRole("button", { name: "Send report" }).click();
    await page.getByRole("status").filter({ hasText: "the report was sent" }).waitFor();
    const { reports } = await adminApi<{ reports: any[] }>("/api/admin/reports?status=open");
    const mine = reports.find((r) => r.room === room.uuid)!;
    assert.deepEqual([mine.reason, mine.message_id], ["Rude and off-topic.", id]);
    // A refusal shows the server's sentence.
    await page.getByLabel("What is wrong here?").fill("again");
    await page.getByLabel("Message number (optional)").fill("9999");
    await page.getByRole("button", { name: "Send report" }).click();
    await page.getByRole("alert").filter({ hasText: "no message with id 9999" }).waitFor();
    assert.deepEqual(problems, []);
  } finally {
    await page.close();
  }
});

test("axe finds nothing on the console's pages, logged out and in, nor on the report form", async () => {
  const room = await api<{ uuid: string }>("/api/rooms", { description: "a11y room", is_public: true });
  await api(`/api/rooms/${room.uuid}/messages`, { agent_id: "ann", text: "hello" });
  await api(`/api/rooms/${room.uuid}/report`, { reason: "for the reports page" });
  await adminApi(`/api/admin/rooms/${room.uuid}/hide`, { reason: "a11y" });
  const cookie = await sessionCookie();
  const findings = await auditConsole("/admin", undefined, "login form");
  for (const path of ["/admin", "/admin/rooms", `/admin/rooms/${room.uuid}`, "/admin/alerts", "/admin/reports", "/admin/reports?status=all", "/admin/audit"]) {
    findings.push(...(await auditConsole(path, cookie)));
  }
  assert.deepEqual(findings, [], formatFindings(findings));
});

/**
 * auditPage for the console: its CSP allows no script at all, so axe (a script) is let in by a
 * context that bypasses the CSP. What the CSP itself allows is checked in tests/api/admin.test.ts
 * and, with the real CSP, by the tests above (no page errors, no refusals).
 */
async function auditConsole(pathname: string, cookie?: string, state?: string): Promise<A11yFinding[]> {
  const findings: A11yFinding[] = [];
  for (const [width, viewport] of Object.entries(A11Y_VIEWPORTS)) {
    const context = await browser.newContext({ baseURL: running.url, viewport, bypassCSP: true, extraHTTPHeaders: cookie ? { cookie } : {} });
    try {
      const page = await context.newPage();
      const problems: string[] = [];
      page.on("pageerror", (err) => problems.push(`page error: ${err.message}`));
      const res = await page.goto(pathname);
      assert.equal(res?.status(), 200, pathname);
      const violations = await axeViolations(page);
      if (violations.length > 0 || problems.length > 0) findings.push({ where: `${pathname}${state ? ` (${state})` : ""} at ${width} ${viewport.width}px`, violations, problems });
    } finally {
      await context.close();
    }
  }
  return findings;
}

test("axe finds nothing in the watcher's report form, folded and open, at both widths", async () => {
  const room = await api<{ uuid: string }>("/api/rooms", { description: "a11y report form" });
  for (const viewport of Object.values(A11Y_VIEWPORTS)) {
    const { page, problems } = await openPage(browser, running.url, { viewport });
    try {
      await page.goto(`/${room.uuid}`);
      await axeViolations(page); // injects axe
      // Only this component: the rest of the watcher page is checked by tests/e2e/a11y.test.ts.
      const inForm = () =>
        page.evaluate(async () => {
          type Result = { violations: { id: string; help: string; nodes: { html: string }[] }[] };
          const axe = (window as unknown as { axe: { run: (context: unknown, options: unknown) => Promise<Result> } }).axe;
          const { violations } = await axe.run({ include: [[".report-room"]] }, { runOnly: { type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"] }, resultTypes: ["violations"] });
          return violations.map((v) => `${v.id}: ${v.help} (${v.nodes.map((n) => n.html).join(" | ")})`);
        });
      assert.deepEqual(await inForm(), [], "folded");
      await page.getByText("Report this room").click();
      await page.getByLabel("What is wrong here?").waitFor();
      assert.deepEqual(await inForm(), [], "open");
      assert.deepEqual(problems, []);
    } finally {
      await page.close();
    }
  }
});
