/**
 * Accessibility of the pages in a real browser: axe-core's WCAG 2.0/2.1 A and AA rules pass on
 * every page, at desktop and phone widths (and in each colour scheme the CSS styles), for an empty
 * and a talking open room, a room with ledger threads and tasks (every fold and history opened
 * too), a turns room, the landing page's form states, the public list and the status pages. And
 * the panels a room does not use stay out of the way until something happens there.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import crypto from "node:crypto";
import type { Browser, Page } from "playwright-core";
import { auditPage, formatFindings, openPage, startBrowserFixture, type BrowserFixture, type JsonApi } from "../helpers/browser";
import { startFakeLlm, arbiterEnv, type FakeLlm } from "../helpers/fake-llm";
import { type RunningServer } from "../../server";

let fx: BrowserFixture;
/** The arbiter's provider (the one stand-in): premium rooms, "Refresh ledger" and the arbiter's facts show. */
let llm: FakeLlm;
let running: RunningServer;
/** The server's clock runs this far ahead of the real one: the last test moves it to expire a room. */
let clockOffset = 0;
let browser: Browser;
let api: JsonApi;

before(
  async () => {
    llm = await startFakeLlm();
    fx = await startBrowserFixture({ clock: { now: () => Date.now() + clockOffset }, env: arbiterEnv(llm) });
    ({ running, browser, api } = fx);
  },
  { timeout: 600_000 },
);

after(async () => {
  await fx?.close();
  await llm?.close();
});

// ---------- helpers ----------

type Room = { uuid: string; owner_token: string };
const createRoom = (body: Record<string, unknown>) => api<Room>("/api/rooms", body);
const say = async (room: string, agent_id: string, text: string, extra: Record<string, unknown> = {}) =>
  (await api<{ id: number }>(`/api/rooms/${room}/messages`, { agent_id, text, ...extra })).id;

/** Checks `pathname` in the state `ready` brings it to, and fails with every violation's id and nodes. */
async function assertAccessible(pathname: string, state: string, ready?: (page: Page) => Promise<void>): Promise<void> {
  const findings = await auditPage(browser, running.url, pathname, { state, ready });
  assert.equal(findings.length, 0, `axe found WCAG A/AA violations:\n${formatFindings(findings)}`);
}

/** The watcher once it is live and has verified the room in the browser: nothing left to change by itself. */
async function watcherReady(page: Page): Promise<void> {
  await page.locator('.live-indicator[data-state="live"]').waitFor({ timeout: 15_000 });
  await page.locator("section.integrity .verdict[data-verdict=CLEAN]").waitFor({ timeout: 20_000 });
}

/** Everything folded away, shown: every <details>, and every thread's history (loaded). */
async function openEverything(page: Page): Promise<void> {
  await page.evaluate(() => document.querySelectorAll("details").forEach((d) => (d.open = true)));
  const closed = page.locator('.thread-toggle[aria-expanded="false"]');
  while ((await closed.count()) > 0) await closed.first().click();
  await page.waitForFunction(() => document.querySelectorAll(".thread-history").length === document.querySelectorAll(".thread-toggle").length);
  await page.waitForFunction(() => !document.querySelector(".thread-history [aria-busy]"));
}

/** A conversation with the markdown agents write: emphasis, lists, code (one long line), a quote, a link, an image, raw HTML, a reply. */
async function converse(room: string): Promise<void> {
  await say(room, "planner", "## Plan\n\nI propose we ship **v2 on 12 December**. Open items:\n\n- finish the watcher\n- update `README.md`\n\n> quoted from the spec\n\nSee [the spec](https://example.com/spec) and ![a diagram](https://example.com/d.png).");
  const id = await say(room, "builder", "Works for me:\n\n```ts\nconst stream = new EventSource(`/api/rooms/${id}/events?since=0`); stream.addEventListener(\"message.posted\", (e) => render(JSON.parse(e.data)));\n```\n\n<b>raw html stays text</b>");
  await say(room, "reviewer", "Agreed.", { reply_to: id });
}

// ---------- tests ----------

test("the landing page passes: the form, its turns fields, and the room it created", async () => {
  await assertAccessible("/", "the form");
  await assertAccessible("/", "the turns fields, supervisor policy", async (page) => {
    await page.selectOption("#mode", "turns");
    await page.selectOption("#turns-policy", "supervisor");
    await page.fill("#turns-participants", "planner, builder");
    await page.selectOption("#turns-supervisor", "planner");
  });
  await assertAccessible("/", "a turns room created", async (page) => {
    await page.fill("#description", "Plan the launch.");
    await page.selectOption("#mode", "turns");
    await page.fill("#turns-participants", "planner, builder");
    await page.fill("#turns-delay", "0");
    await page.click('button[type="submit"]');
    await page.locator("#room-url").waitFor({ timeout: 10_000 });
  });
});

test("the public rooms page passes, listed and empty", async () => {
  await createRoom({ description: "A public room to list.", is_public: true });
  await createRoom({ description: "", is_public: true, protocol_mode: "premium" });
  await assertAccessible("/rooms", "rooms listed");
  await assertAccessible("/rooms?q=no-room-has-this-text", "nothing matches");
});

test("an open room passes, empty (its ledger folded, then opened) and with a conversation", async () => {
  const empty = await createRoom({ description: "Nobody here yet." });
  await assertAccessible(`/${empty.uuid}`, "empty", watcherReady);
  await assertAccessible(`/${empty.uuid}`, "empty, every fold opened", async (page) => {
    await watcherReady(page);
    await openEverything(page);
  });

  const talking = await createRoom({ description: "Agree on a release date for v2 and split the remaining work.", is_public: true });
  await converse(talking.uuid);
  await assertAccessible(`/${talking.uuid}`, "a conversation", async (page) => {
    await watcherReady(page);
    await page.locator(".messages > li.msg", { hasText: "Agreed." }).waitFor();
  });
});

test("a room with ledger threads and tasks passes, and with every fold and history opened", async () => {
  const { uuid: room } = await createRoom({ description: "Parts delivery: dates, prices and the work.", protocol_mode: "premium" });
  const objection = await say(room, "dave", "Not before 5 December: the truck is booked.");
  const proposal = await say(room, "alice", "I propose delivery on **1 December**.");
  const open = async (opened_by: string, subject: string, value: string, extra: Record<string, unknown> = {}) =>
    (await api<{ id: number }>(`/api/rooms/${room}/claims`, { subject, value, opened_by, ...extra })).id;
  const revise = (tid: number, agent_id: string, kind: string, extra: Record<string, unknown> = {}) => api(`/api/rooms/${room}/claims/${tid}/revisions`, { agent_id, kind, ...extra });
  // Agreed, then disputed (with a discrepancy); agreed; proposed; cancelled.
  const date = await open("alice", "Delivery date", "1 December", { source_msg_id: proposal, quote: "delivery on **1 December**" });
  await revise(date, "bob", "confirm");
  await revise(date, "carol", "confirm");
  await revise(date, "dave", "contradict", { value: "not before 5 December", source_msg_id: objection, quote: "Not before 5 December" });
  const price = await open("bob", "Price", "40 EUR per part");
  await revise(price, "alice", "confirm");
  await revise(price, "carol", "confirm");
  await open("carol", "Venue", "Berlin");
  const venue = await open("erin", "Colour", "red");
  await revise(venue, "erin", "retract");

  // Tasks in every column, with a handoff, a receipt (a hash that checks out, one that does not), reviews and failures.
  const task = async (title: string, extra: Record<string, unknown> = {}) => (await api<{ task: { id: number } }>(`/api/rooms/${room}/tasks`, { agent_id: "planner", title, ...extra })).task.id;
  const claim = async (tid: number, agent_id: string) => (await api<{ lease_token: string }>(`/api/rooms/${room}/tasks/${tid}/claim`, { agent_id, lease_s: 600 })).lease_token;
  const leased = (tid: number, action: string, agent_id: string, lease_token: string, body: Record<string, unknown> = {}) =>
    api(`/api/rooms/${room}/tasks/${tid}/${action}`, { agent_id, lease_token, ...body });
  await api(`/api/rooms/${room}/agents`, { agent_id: "coder", capabilities: ["python", "sql"] });
  await task("Write the parser", { requires: ["python", "sql"], reviewer: "checker", priority: 7 });
  await claim(await task("Load the fixtures"), "coder");
  const handed = await task("Review the schema");
  await leased(handed, "handoff", "coder", await claim(handed, "coder"), { to_agent: "checker", note: "you know it best", window_s: 600 });
  const submitted = await task("Export the report");
  await leased(submitted, "submit", "coder", await claim(submitted, "coder"), {
    status: "completed",
    summary: "Report exported.",
    artifacts: [
      { type: "url", ref: "http://203.0.113.9/report.pdf" },
      { type: "text", ref: "ok", sha256: crypto.createHash("sha256").update("ok").digest("hex") },
      { type: "text", ref: "not ok", sha256: "0".repeat(64) },
    ],
  });
  for (const [title, decision] of [
    ["Fix the build", "accept"],
    ["Rename the tables", "reject"],
  ] as const) {
    const tid = await task(title, { reviewer: "checker" });
    await leased(tid, "submit", "coder", await claim(tid, "coder"), { status: "completed", summary: "Done." });
    await api(`/api/rooms/${room}/tasks/${tid}/review`, { agent_id: "checker", decision, note: decision === "accept" ? "verified" : "wrong names" });
  }
  const failed = await task("Migrate the data", { max_failures: 1 });
  await leased(failed, "fail", "coder", await claim(failed, "coder"), { reason: "the source database is down" });
  await api(`/api/rooms/${room}/tasks/${await task("Drop the old tables")}/cancel`, { agent_id: "planner" });

  // Sealed last: two agents acknowledge the final context hash.
  const { context_hash } = await api<{ context_hash: string }>(`/api/rooms/${room}/context`);
  for (const agent_id of ["alice", "bob"]) await api(`/api/rooms/${room}/handshake`, { agent_id, context_hash });

  const ready = async (page: Page) => {
    await watcherReady(page);
    await page.locator('section.ledger[data-sealed="true"]').waitFor();
  };
  await assertAccessible(`/${room}`, "threads and tasks", ready);
  await assertAccessible(`/${room}`, "threads and tasks, every fold and history opened", async (page) => {
    await ready(page);
    await openEverything(page);
  });
});

test("a turns room passes: participants, an open and a claimed turn, a completion proposal", async () => {
  const { uuid: room } = await createRoom({
    description: "Name the product.",
    mode: "turns",
    turns: { participants: ["planner", "builder", "reviewer"], delay_s: 0 },
  });
  const take = async (agent_id: string, text: string, result?: "continue" | "complete") => {
    const { current } = await api<{ current: { id: number; agent_id: string } }>(`/api/rooms/${room}/turns/current`);
    assert.equal(current.agent_id, agent_id);
    const { lease_token } = await api<{ lease_token: string }>(`/api/rooms/${room}/turns/${current.id}/claim`, { agent_id });
    if (result) await api(`/api/rooms/${room}/turns/${current.id}/reply`, { agent_id, lease_token, text, result });
  };
  await assertAccessible(`/${room}`, "the first turn open", watcherReady);
  await take("planner", "I suggest **Quill**.", "continue");
  await take("builder", "Quill it is: I propose we finish.", "complete");
  await take("reviewer", "(claimed, replying)");
  await assertAccessible(`/${room}`, "a proposal, a turn claimed", async (page) => {
    await watcherReady(page);
    await page.locator('.turns-current[data-turn-status="claimed"]').waitFor();
    await page.locator(".turns-proposal").waitFor();
  });
});

test("panels a room does not use stay out of the way until something happens there, then pass too", async () => {
  const { uuid: room } = await createRoom({ description: "Folded panels.", mode: "turns", turns: { participants: ["planner", "builder"], delay_s: 0 } });
  const { page, problems } = await openPage(browser, running.url, { viewport: { width: 1280, height: 900 } });
  await page.goto(`/${room}`);
  await watcherReady(page);
  const ledger = page.locator("section.ledger");
  const board = page.locator("section.task-board");
  // A turns room without threads or tasks: the ledger is folded to its title under the feed, which
  // takes the whole width; the board is not shown.
  assert.equal(await ledger.getAttribute("data-idle"), "true");
  assert.equal(await ledger.locator("details.panel-fold").getAttribute("open"), null);
  assert.equal(await ledger.locator(".ledger-lead").isVisible(), false);
  assert.equal(await board.getAttribute("data-tasks"), "0");
  assert.equal(await board.isVisible(), false);
  const width = async (selector: string) => Math.round((await page.locator(selector).boundingBox())!.width);
  assert.equal(await width(".feed"), await width(".watcher-grid"), "the feed takes the whole width");
  assert.equal(await width("section.ledger"), await width(".watcher-grid"), "the folded ledger lies under it");

  // The first thread arrives live: the ledger opens into the side panel beside the feed.
  await api(`/api/rooms/${room}/claims`, { subject: "Name", value: "Quill", opened_by: "planner" });
  await ledger.locator("li.thread").waitFor({ timeout: 10_000 });
  assert.equal(await ledger.getAttribute("data-idle"), null);
  assert.ok((await width("section.ledger")) < (await width(".watcher-grid")) / 2, "the ledger is a side panel now");
  // The first task arrives live: the board appears.
  await api(`/api/rooms/${room}/tasks`, { agent_id: "planner", title: "Register the domain" });
  await board.locator("li.task-card").waitFor({ timeout: 10_000 });
  assert.equal(await board.getAttribute("data-tasks"), "1");
  assert.deepEqual(problems, []);
  await page.close();

  await assertAccessible(`/${room}`, "a thread and a task arrived", watcherReady);
});

test("the not-found and expired pages pass", async () => {
  await assertAccessible("/00000000-0000-4000-8000-000000000000", "unknown room");
  await assertAccessible("/no-such-page", "unknown page");
  const { uuid } = await createRoom({ description: "short-lived" });
  // Three days without activity: the room has expired (every room has: this test runs last).
  clockOffset += 73 * 3_600_000;
  await assertAccessible(`/${uuid}`, "expired room", async (page) => {
    assert.equal(await page.locator("h1").textContent(), "This room has expired");
  });
});
