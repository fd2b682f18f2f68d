/**
 * The watcher's task board in a real browser: a task moves across the columns live (over the
 * page's one event stream) as an agent claims it, submits a receipt and another agent reviews it.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import crypto from "node:crypto";
import type { Browser, Page } from "playwright-core";
import { openPage, startBrowserFixture, type BrowserFixture, type JsonApi } from "../helpers/browser";
import { type RunningServer } from "../../server";

const XSS = `<img src=x onerror="window.__pwned=1">`;

let fx: BrowserFixture;
let running: RunningServer;
let browser: Browser;
let api: JsonApi;

before(
  async () => {
    fx = await startBrowserFixture();
    ({ running, browser, api } = fx);
  },
  { timeout: 600_000 },
);

after(async () => {
  await fx?.close();
});

const text = async (page: Page, selector: string) => ((await page.locator(selector).first().textContent()) ?? "").replace(/\s+/g, " ").trim();

test("a task moves across the board live as an agent claims, submits and another reviews", async () => {
  const { uuid: room } = await api<{ uuid: string }>("/api/rooms", { description: "Ship the parser." });
  const { page, problems } = await openPage(browser, running.url);
  const streams: string[] = [];
  const outside: string[] = [];
  page.on("request", (r) => {
    if (/\/api\/rooms\/[^/]+\/events/.test(r.url())) streams.push(r.url());
    if (!r.url().startsWith(running.url) && !r.url().startsWith("data:")) outside.push(r.url());
  });
  await page.goto(`${running.url}/${room}`);
  await page.locator('.live-indicator[data-state="live"]').waitFor({ timeout: 15_000 });
  const board = page.locator("section.task-board");
  assert.equal(await board.getAttribute("data-tasks"), "0");
  await page.evaluate(() => ((window as unknown as { __sameDocument: number }).__sameDocument = 1));

  // Created: it shows in Open.
  await api(`/api/rooms/${room}/agents`, { agent_id: "coder", capabilities: ["python"] });
  const { task } = await api<{ task: { id: number } }>(`/api/rooms/${room}/tasks`, { agent_id: "planner", title: `Write the parser ${XSS}`, requires: ["python"], reviewer: "checker", priority: 7 });
  const card = board.locator(`li.task-card[data-task-id="${task.id}"]`);
  await board.locator(`.task-column[data-status="open"] li.task-card[data-task-id="${task.id}"]`).waitFor({ timeout: 10_000 });
  assert.equal(await text(page, `li.task-card[data-task-id="${task.id}"] .task-title`), `Write the parser ${XSS}`, "agent text is shown as text");
  assert.equal(await text(page, `li.task-card[data-task-id="${task.id}"] .task-priority`), "P7");

  // Claimed: it moves to Claimed with its claimant and a lease countdown.
  const claim = await api<{ lease_token: string }>(`/api/rooms/${room}/tasks/${task.id}/claim`, { agent_id: "coder", lease_s: 600 });
  await board.locator(`.task-column[data-status="claimed"] li.task-card[data-task-id="${task.id}"]`).waitFor({ timeout: 10_000 });
  assert.match(await text(page, `li.task-card[data-task-id="${task.id}"] .task-claimant`), /^claimed by coder · (9 min \d\d s|10 min 00 s) left$/);

  // Submitted: a receipt with its artifacts.
  await api(`/api/rooms/${room}/tasks/${task.id}/submit`, {
    agent_id: "coder",
    lease_token: claim.lease_token,
    status: "completed",
    summary: "Parser done, tests green.",
    artifacts: [
      { type: "url", ref: "http://203.0.113.9/report.png" },
      { type: "text", ref: "ok", sha256: crypto.createHash("sha256").update("ok").digest("hex") },
    ],
  });
  await board.locator(`.task-column[data-status="submitted"] li.task-card[data-task-id="${task.id}"]`).waitFor({ timeout: 10_000 });
  await card.locator(".task-receipt summary").click();
  assert.equal(await text(page, `li.task-card[data-task-id="${task.id}"] .task-receipt summary`), "receipt: completed by coder");
  assert.deepEqual(
    (await card.locator(".task-artifacts li").allTextContents()).map((s) => s.replace(/\s+/g, " ").trim()),
    ["url http://203.0.113.9/report.png", "text ok sha256 ok"],
  );

  // Reviewed by someone else: accepted.
  await api(`/api/rooms/${room}/tasks/${task.id}/review`, { agent_id: "checker", decision: "accept", note: "verified" });
  await board.locator(`.task-column[data-status="accepted"] li.task-card[data-task-id="${task.id}"]`).waitFor({ timeout: 10_000 });
  assert.equal(await text(page, `li.task-card[data-task-id="${task.id}"] .task-review`), "review: accept by checker — verified");
  assert.equal(await board.locator(`.task-column[data-status="submitted"] li.task-card`).count(), 0);

  assert.equal(await page.evaluate(() => (window as unknown as { __sameDocument?: number }).__sameDocument), 1, "the page never reloaded");
  assert.equal(await page.evaluate(() => (window as unknown as { __pwned?: number }).__pwned), undefined);
  assert.equal(new Set(streams).size, 1, "one event stream for the whole page");
  assert.deepEqual(outside, [], "the browser fetched nothing outside the server (artifacts are never fetched)");
  assert.deepEqual(problems, []);
  await page.close();
});
