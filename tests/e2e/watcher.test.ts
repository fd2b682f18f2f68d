/**
 * The pages in a real browser against the real server: the create-room form, the live watcher
 * (SSE, reconnect, paging back), what untrusted text can and cannot do, and the page headers.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import type { Socket } from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { Browser, Page, Request } from "playwright-core";
import { openPage, startBrowserFixture, type BrowserFixture, type JsonApi } from "../helpers/browser";
import { type RunningServer } from "../../server";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const RESULTS = path.join(ROOT, "test-results");
const XSS = `<img src=x onerror="window.__pwned=1">`;

let fx: BrowserFixture;
let running: RunningServer;
/** The server's clock runs this far ahead of the real one: a test moves it to expire rooms. */
let clockOffset = 0;
let browser: Browser;
let api: JsonApi;
/** Sockets of open SSE streams, so a test can cut them as a network failure would. */
const streams = new Set<Socket>();
/** Every SSE request the server received: where it asked to resume from. */
const streamLog: { url: URL; lastEventId?: string }[] = [];

before(
  async () => {
    fx = await startBrowserFixture({ clock: { now: () => Date.now() + clockOffset } });
    ({ running, browser, api } = fx);
    running.server.on("request", (req) => {
      if (isStream(req.url ?? "")) {
        streamLog.push({ url: new URL(req.url!, running.url), lastEventId: req.headers["last-event-id"] as string | undefined });
        streams.add(req.socket);
        req.socket.once("close", () => streams.delete(req.socket));
      }
    });
  },
  { timeout: 600_000 },
);

after(async () => {
  await fx?.close();
});

// ---------- helpers ----------

const isStream = (url: string) => /\/api\/rooms\/[^/]+\/events/.test(url);
const createRoom = (body: Record<string, unknown> = {}) => api<{ uuid: string; url: string; owner_token: string }>("/api/rooms", body);
const post = (room: string, agent_id: string, text: string, extra: Record<string, unknown> = {}) =>
  api<{ id: number }>(`/api/rooms/${room}/messages`, { agent_id, text, ...extra });

/** A page that fails the test on script errors and CSP violations. */
const newPage = () => openPage(browser, running.url);

const live = (page: Page) => page.locator('.live-indicator[data-state="live"]').waitFor({ timeout: 15_000 });
const messageItems = (page: Page, text?: string) => page.locator(".messages > li.msg", text ? { hasText: text } : undefined);

// ---------- tests ----------

test("a room created with the form on / shows the URL, and its watcher shows new messages without reload", async () => {
  const { page, problems } = await newPage();
  const home = await page.goto(running.url + "/");
  assert.equal(home?.status(), 200);

  const description = "Plan the launch: pick a date and split the work.";
  await page.fill("#description", description);
  assert.equal(await page.locator(".counter").textContent(), `${description.length}/500`);
  await page.click('button[type="submit"]');

  const url = (await page.locator("#room-url").textContent({ timeout: 10_000 }))!.trim();
  assert.match(url, new RegExp(`^${running.url}/[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}$`));
  const uuid = url.slice(running.url.length + 1);
  assert.match((await page.locator("#owner-token").textContent())!, /^\S{20,}$/);
  assert.match((await page.locator(".created").textContent())!, /Shown once/);
  assert.equal(
    (await page.locator("#agent-instruction").textContent())!.trim(),
    `Join the Parley room at ${url} — fetch it with ?format=md for instructions, then take part until the task is done.`,
  );

  await page.click("text=Open the watcher");
  await page.waitForURL(url);
  await live(page);
  assert.equal((await page.locator(".room-description").textContent())!.trim(), description);
  assert.equal(await messageItems(page).count(), 0);

  await post(uuid, "planner", "First: I propose **Friday**.");
  await post(uuid, "builder", "Second: Friday works. I take the watcher.", { reply_to: (await api<{ head: { size: number } }>(`/api/rooms/${uuid}`)).head.size });
  await messageItems(page, "Second: Friday works").waitFor({ timeout: 10_000 });
  assert.equal(await messageItems(page).count(), 2);
  assert.deepEqual(await page.locator(".msg .agent").allTextContents(), ["planner", "builder"]);
  assert.equal(await messageItems(page, "First").locator("strong").textContent(), "Friday");
  assert.match((await messageItems(page, "Second").locator(".reply-to").textContent())!, /↪ #\d+/);
  assert.equal(await page.locator(".feed-count").textContent(), "2 messages");
  assert.deepEqual(problems, []);
  await page.close();
});

test("the watcher is served with the security headers, the markdown link and the agent instructions", async () => {
  const { uuid } = await createRoom({ description: "headers" });
  const { page, problems } = await newPage();
  const res = await page.goto(`${running.url}/${uuid}`);
  assert.equal(res?.status(), 200);
  const headers = res!.headers();
  assert.match(headers["content-security-policy"]!, /img-src 'self' data:/);
  assert.match(headers["content-security-policy"]!, /frame-ancestors 'none'/);
  assert.equal(headers["x-content-type-options"], "nosniff");
  assert.equal(headers["referrer-policy"], "no-referrer");

  assert.equal(await page.locator('head link[rel="alternate"][type="text/markdown"]').getAttribute("href"), `/${uuid}?format=md`);
  assert.equal((await page.locator("details.agent-instructions summary").textContent())!.trim(), "For AI agents reading this URL");
  const instructions = await page.locator("details.agent-instructions pre").textContent();
  const markdown = await (await fetch(`${running.url}/${uuid}?format=md`)).text();
  assert.equal(instructions, markdown, "the <details> block holds the same text agents get as markdown");
  await live(page);
  assert.deepEqual(problems, []);

  const missing = await page.goto(`${running.url}/00000000-0000-4000-8000-000000000000`);
  assert.equal(missing?.status(), 404);
  assert.equal(await page.locator("h1").textContent(), "Not found");
  assert.equal((await page.goto(`${running.url}/not-a-room-id`))?.status(), 404);
  await page.close();
});

test("agent and creator text cannot run script, inject markup or load remote images", async () => {
  const room = await createRoom({ description: XSS, is_public: true });
  await post(room.uuid, "mallory", `${XSS}\n\n![x](http://evil.example.test/pixel.png)\n\n<script>window.__pwned=1</script>`);
  const { page, problems } = await newPage();
  const requests: string[] = [];
  page.on("request", (r) => requests.push(r.url()));

  await page.goto(`/${room.uuid}`);
  await live(page);
  // The same payload once more through the live path (client-side rendering).
  await post(room.uuid, "mallory", `live ${XSS} ![y](http://evil.example.test/live.png) <script>window.__pwned=1</script>`);
  await messageItems(page, "live").waitFor({ timeout: 10_000 });

  // No <img> was made from agent text (so no onerror can run later) and no script ran.
  assert.equal(await page.locator(".feed img, .room-head img").count(), 0);
  assert.equal(await page.evaluate(() => (window as unknown as { __pwned?: unknown }).__pwned), undefined);
  assert.equal((await page.locator(".room-description").textContent())!.trim(), XSS);
  const first = (await messageItems(page).first().locator(".msg-body").textContent())!;
  assert.ok(first.includes(XSS), `raw HTML is shown as text, got: ${first}`);
  assert.ok(first.includes("<script>window.__pwned=1</script>"));
  assert.ok(first.includes("[image: x](http://evil.example.test/pixel.png)"));
  assert.equal(await page.locator(".feed script").count(), 0);

  // The public list renders the description as text too.
  await page.goto(`${running.url}/rooms?q=${encodeURIComponent("onerror")}`);
  assert.equal((await page.locator(".room-desc").first().textContent())!.trim(), XSS);
  assert.equal(await page.locator("main img").count(), 0);
  assert.equal(await page.evaluate(() => (window as unknown as { __pwned?: unknown }).__pwned), undefined);

  assert.deepEqual(requests.filter((u) => u.includes("evil.example.test")), []);
  assert.deepEqual(problems, []);
  await page.close();
});

test("the live indicator says live, and messages posted while the stream is down appear exactly once after it reconnects", async () => {
  const room = await createRoom({ description: "reconnect" });
  await post(room.uuid, "a", "rendered by the server");
  const { page, problems } = await newPage();
  // Every stream request the page makes, in order.
  const streamRequests: Request[] = [];
  page.on("request", (r) => {
    if (isStream(r.url())) streamRequests.push(r);
  });
  // The first stream replays the room from its start, as a server that lost track of the
  // client's cursor would: the feed must not show twice what the page already shows.
  let replayed = false;
  await page.route("**/api/rooms/*/events*", async (route) => {
    const url = new URL(route.request().url());
    if (!replayed) url.searchParams.set("since", "0");
    replayed = true;
    await route.continue({ url: url.toString() });
  });
  await page.goto(`/${room.uuid}`);
  await live(page);
  assert.equal((await page.locator(".live-indicator").textContent())!.trim(), "live");
  const { id: lastSeen } = await post(room.uuid, "a", "delivered by the stream");
  await messageItems(page, "delivered by the stream").waitFor({ timeout: 10_000 });
  assert.equal(await messageItems(page).count(), 2);

  // Cut the network: the browser goes offline and the server side of the stream is closed, as
  // when a proxy or a Wi-Fi change drops the connection.
  const opened = streamLog.length;
  await page.context().setOffline(true);
  for (const socket of streams) socket.destroy();
  await page.locator('.live-indicator[data-state="reconnecting"]').waitFor({ timeout: 10_000 });
  await post(room.uuid, "b", "posted while disconnected");
  await post(room.uuid, "c", "also posted while disconnected");
  // A reconnect attempt made after those posts fails: had it reached the server, it would have
  // brought them.
  const earlier = new Set(streamRequests);
  await page.waitForEvent("requestfailed", { predicate: (r) => isStream(r.url()) && !earlier.has(r), timeout: 15_000 });
  assert.equal(await messageItems(page, "while disconnected").count(), 0, "nothing can arrive while offline");
  assert.equal(await page.locator(".live-indicator").getAttribute("data-state"), "reconnecting");

  await page.context().setOffline(false);
  await live(page);
  // A message posted once the stream is back comes after anything it replays: when it shows,
  // the feed holds everything it will, and each message once.
  await post(room.uuid, "a", "after the reconnect");
  await messageItems(page, "after the reconnect").waitFor({ timeout: 15_000 });
  assert.deepEqual(await page.locator(".msg-body").allTextContents(), [
    "rendered by the server",
    "delivered by the stream",
    "posted while disconnected",
    "also posted while disconnected",
    "after the reconnect",
  ]);
  assert.equal(await page.locator(".feed-count").textContent(), "5 messages");

  // The streams opened after the drop resumed right after the last event the page had seen.
  const reopened = streamLog.slice(opened);
  assert.ok(reopened.length >= 1, "the stream was opened again");
  for (const r of reopened) {
    const from = Number(r.lastEventId ?? r.url.searchParams.get("since"));
    assert.equal(from, lastSeen, `resumed with ${r.url.search}, Last-Event-ID ${r.lastEventId}`);
  }
  assert.deepEqual(problems, []);
  await page.close();
});

test("a long room renders its newest 50 messages and pages back through the rest, across gaps in the ids", async () => {
  const room = await createRoom({ description: "a long conversation" });
  const ids: number[] = [];
  for (let i = 1; i <= 130; i++) {
    ids.push((await post(room.uuid, i % 2 ? "odd" : "even", `message number ${i}`)).id);
    // Other events share the sequence: message ids have gaps.
    if (i % 40 === 0) {
      await api(`/api/rooms/${room.uuid}/close`, {}, { token: room.owner_token });
      await api(`/api/rooms/${room.uuid}/reopen`, {}, { token: room.owner_token });
    }
  }
  const { page, problems } = await newPage();
  await page.goto(`/${room.uuid}`);
  await live(page);
  const shownIds = async () => (await page.locator(".messages > li.msg").evaluateAll((els) => els.map((e) => Number(e.id.slice(1)))));

  assert.deepEqual(await shownIds(), ids.slice(-50));
  assert.equal(await page.locator(".feed-count").textContent(), "130 messages");
  const feed = page.locator(".feed-scroll");
  const atBottom = () => feed.evaluate((el) => el.scrollHeight - el.scrollTop - el.clientHeight < 2);
  assert.ok(await atBottom(), "the feed opens at its newest message");
  const older = page.getByRole("button", { name: "Load older messages" });
  await older.click();
  await page.waitForFunction(() => document.querySelectorAll(".messages > li.msg").length === 100);
  assert.deepEqual(await shownIds(), ids.slice(-100));
  await older.click();
  await page.locator(".feed-start").waitFor();
  assert.deepEqual(await shownIds(), ids);
  assert.equal(await older.count(), 0);

  // A reader scrolled up keeps their place when a message arrives, and is told about it.
  await feed.evaluate((el) => (el.scrollTop = 0));
  await post(room.uuid, "odd", "arrives while the reader is scrolled up");
  await page.locator(".jump", { hasText: "1 new message" }).waitFor({ timeout: 10_000 });
  assert.equal(await feed.evaluate((el) => el.scrollTop), 0);
  await page.locator(".jump").click();
  await page.waitForFunction(() => !document.querySelector(".jump"));
  assert.ok(await atBottom());
  // At the bottom, the next message scrolls into view by itself.
  await post(room.uuid, "even", "arrives while the reader is at the bottom");
  await messageItems(page, "at the bottom").waitFor({ timeout: 10_000 });
  await page.waitForFunction(() => {
    const el = document.querySelector(".feed-scroll")!;
    return el.scrollHeight - el.scrollTop - el.clientHeight < 2;
  });

  // A live closing shows as a system line and flips the status badge.
  await api(`/api/rooms/${room.uuid}/close`, {}, { token: room.owner_token });
  await page.locator(".system-line", { hasText: "closed" }).waitFor({ timeout: 10_000 });
  assert.match((await page.locator(".feed-bar .badge").textContent())!, /closed/);
  assert.deepEqual(problems, []);
  await page.close();
});

test("a room that expires while watched ends the live feed, and its URL then shows the expired page", async () => {
  const room = await createRoom({ description: "short-lived" });
  const { page, problems } = await newPage();
  await page.clock.install();
  await page.goto(`/${room.uuid}`);
  await live(page);

  // Three days without activity pass, on the server and in the browser.
  clockOffset += 73 * 3_600_000;
  await page.clock.fastForward(73 * 3_600_000);
  await page.locator('.live-indicator[data-state="ended"]').waitFor({ timeout: 10_000 });
  assert.match((await page.locator(".feed .notice").textContent())!, /expired/);

  await page.goto(`/${room.uuid}`);
  assert.equal(await page.locator("h1").textContent(), "This room has expired");
  assert.equal(await page.locator(".feed").count(), 0);
  assert.deepEqual(problems, []);
  await page.close();
});

test("screenshot of the watcher (test artifact)", async () => {
  const room = await createRoom({ description: "Agree on a release date for v2 and split the remaining work.", is_public: true });
  await post(room.uuid, "planner", "I propose we ship **v2 on 12 December**. Open items:\n\n- finish the watcher\n- write the e2e test\n- update `README.md`\n\nSee [the spec](https://example.com/spec).");
  const { id } = await post(room.uuid, "builder", "Works for me. The feed, in short:\n\n```ts\nconst es = new EventSource(`/api/rooms/${id}/events`);\nes.addEventListener(\"message.posted\", render);\n```");
  await post(room.uuid, "reviewer", "Agreed. `<img>` tags stay text, and remote images are never loaded.", { reply_to: id });
  const { page } = await newPage();
  await page.goto(`/${room.uuid}`);
  await live(page);
  await messageItems(page, "Agreed").waitFor();
  fs.mkdirSync(RESULTS, { recursive: true });
  await page.screenshot({ path: path.join(RESULTS, "watcher.png"), fullPage: true });
  assert.ok(fs.statSync(path.join(RESULTS, "watcher.png")).size > 10_000);
  await page.close();
});
