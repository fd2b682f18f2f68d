/**
 * The watcher's ledger panel in a real browser: threads move between statuses live (over the
 * page's one event stream), discrepancies appear, the revision history expands, the seal shows who
 * sealed the ledger, "jump to message" brings a thread's source message into the feed, and the
 * "Refresh ledger" button exists only when the server has an arbiter.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { Browser, Page } from "playwright-core";
import { subjectKey } from "../../lib/domain/ledger";
import { openPage, startBrowserFixture, type BrowserFixture, type JsonApi } from "../helpers/browser";
import { answer, arbiterEnv, startFakeLlm } from "../helpers/fake-llm";
import { type RunningServer } from "../../server";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const RESULTS = path.join(ROOT, "test-results");
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

// ---------- helpers ----------

const createRoom = (description: string) => api<{ uuid: string }>("/api/rooms", { description });
const say = async (room: string, agent_id: string, text: string) => (await api<{ id: number }>(`/api/rooms/${room}/messages`, { agent_id, text })).id;
const open = async (room: string, opened_by: string, subject: string, value: string, extra: Record<string, unknown> = {}) =>
  (await api<{ id: number }>(`/api/rooms/${room}/claims`, { subject, value, opened_by, ...extra })).id;
const revise = (room: string, tid: number, agent_id: string, kind: string, extra: Record<string, unknown> = {}) =>
  api(`/api/rooms/${room}/claims/${tid}/revisions`, { agent_id, kind, ...extra });
const contextHash = async (room: string) => (await api<{ context_hash: string }>(`/api/rooms/${room}/context`)).context_hash;
const handshake = async (room: string, agent_id: string) => api(`/api/rooms/${room}/handshake`, { agent_id, context_hash: await contextHash(room) });

/** A page that fails the test on script errors and CSP violations, and counts its event streams. */
async function newPage(viewport?: { width: number; height: number }): Promise<{ page: Page; problems: string[]; streams: string[] }> {
  const { page, problems } = await openPage(browser, running.url, { viewport });
  const streams: string[] = [];
  page.on("request", (r) => {
    if (/\/api\/rooms\/[^/]+\/events/.test(r.url())) streams.push(r.url());
  });
  return { page, problems, streams };
}

async function watch(page: Page, room: string): Promise<void> {
  await page.goto(`/${room}`);
  await page.locator('.live-indicator[data-state="live"]').waitFor({ timeout: 15_000 });
}

const panel = (page: Page) => page.locator("section.ledger");
const thread = (page: Page, id: number) => panel(page).locator(`li.thread[data-thread-id="${id}"]`);
const text = async (page: Page, selector: string) => ((await page.locator(selector).textContent()) ?? "").replace(/\s+/g, " ").trim();
const texts = async (page: Page, selector: string) => (await page.locator(selector).allTextContents()).map((s) => s.replace(/\s+/g, " ").trim());

// ---------- tests ----------

test("the panel follows a thread live: proposed → agreed with the confirmations, disputed with a discrepancy, its history, then the seal", async () => {
  const { uuid: room } = await createRoom("Agree on a delivery date for the parts.");
  const proposal = await say(room, "alice", "I propose delivery on **1 December**.");
  await say(room, "bob", "1 December works for me.");
  await say(room, "carol", "Same here.");
  const objection = await say(room, "dave", "Not before 5 December: the truck is booked.");

  const { page, problems, streams } = await newPage();
  await watch(page, room);
  const section = panel(page);
  assert.equal(await section.getAttribute("data-threads"), "0");
  assert.match(await text(page, ".ledger-lead"), /^Nothing settled yet: the ledger tracks what the agents negotiate, one thread per subject \(a price, a date…\), agreed once 2 other agents confirm it\.$/);
  assert.equal(await section.getByRole("button", { name: "Refresh ledger" }).count(), 0, "no arbiter configured: no refresh button");
  assert.equal(await text(page, ".ledger-seal dd"), "not sealed");
  // Anything that survives until the end proves the page was never reloaded.
  await page.evaluate(() => ((window as unknown as { __sameDocument: number }).__sameDocument = 1));

  // alice opens the thread: it appears as proposed, with its owner.
  const tid = await open(room, "alice", "Delivery date", "1 December", { source_msg_id: proposal, quote: "delivery on **1 December**" });
  await thread(page, tid).and(page.locator('[data-status="proposed"]')).waitFor({ timeout: 10_000 });
  assert.equal(await text(page, `li.thread[data-thread-id="${tid}"] .thread-subject`), "Delivery date");
  assert.equal(await text(page, `li.thread[data-thread-id="${tid}"] .thread-value`), "1 December");
  assert.equal(await text(page, `li.thread[data-thread-id="${tid}"] .thread-owner`), "by alice anon");
  assert.equal(await text(page, `li.thread[data-thread-id="${tid}"] .thread-confirmations`), "no confirmations yet · 2 needed");
  assert.equal(await text(page, '.ledger-group[data-status="proposed"] h3'), "Proposed 1");
  assert.equal(await section.getAttribute("data-threads"), "1");
  assert.equal(await section.locator(".ledger-lead").count(), 0);

  // bob confirms: still proposed, one more needed.
  await revise(room, tid, "bob", "confirm");
  await thread(page, tid).locator(".thread-confirmations", { hasText: "bob" }).waitFor({ timeout: 10_000 });
  assert.equal(await thread(page, tid).getAttribute("data-status"), "proposed");
  assert.equal(await text(page, `li.thread[data-thread-id="${tid}"] .thread-confirmations`), "confirmed by bob · 1 more needed");

  // carol confirms: agreed, in the agreed group, both confirmations listed.
  await revise(room, tid, "carol", "confirm");
  await section.locator(`.ledger-group[data-status="agreed"] li.thread[data-thread-id="${tid}"]`).waitFor({ timeout: 10_000 });
  assert.equal(await text(page, `li.thread[data-thread-id="${tid}"] .status-badge`), "agreed");
  assert.equal(await text(page, `li.thread[data-thread-id="${tid}"] .thread-confirmations`), "confirmed by bob, carol");
  assert.equal(await section.locator('.ledger-group[data-status="proposed"]').count(), 0);
  assert.equal(await text(page, `li.thread[data-thread-id="${tid}"] .thread-toggle`).then((s) => s.split(" · ")[0]), "3 revisions");

  // dave contradicts: disputed, and an open discrepancy names the thread.
  await revise(room, tid, "dave", "contradict", { value: "not before 5 December", source_msg_id: objection, quote: "Not before 5 December" });
  await section.locator(`.ledger-group[data-status="disputed"] li.thread[data-thread-id="${tid}"]`).waitFor({ timeout: 10_000 });
  const discrepancy = section.locator("li.discrepancy");
  await discrepancy.waitFor({ timeout: 10_000 });
  assert.equal(await discrepancy.count(), 1);
  assert.equal(await discrepancy.getAttribute("data-status"), "open");
  assert.equal(await text(page, "li.discrepancy .severity"), "medium");
  assert.equal(await text(page, "li.discrepancy .disc-status"), "open");
  assert.equal(await text(page, "li.discrepancy .disc-thread"), "Delivery date");
  assert.match(await text(page, "li.discrepancy .disc-text"), /^dave contradicts the agreed "Delivery date" \(1 December\): not before 5 December\.$/);
  assert.match(await text(page, ".discrepancies h3"), /^Discrepancies 1 open$/);
  assert.equal(await text(page, `li.thread[data-thread-id="${tid}"] .thread-confirmations`), "no confirmations yet · 2 needed", "a dispute needs a fresh quorum");

  // The history: propose, confirm, confirm, contradict, with authors, via and quotes.
  const toggle = thread(page, tid).locator(".thread-toggle");
  assert.equal(await toggle.getAttribute("aria-expanded"), "false");
  await toggle.click();
  assert.equal(await toggle.getAttribute("aria-expanded"), "true");
  const revisions = thread(page, tid).locator("li.revision");
  await revisions.nth(3).waitFor({ timeout: 10_000 });
  const scope = `li.thread[data-thread-id="${tid}"]`;
  assert.deepEqual(await texts(page, `${scope} .rev-kind`), ["propose", "confirm", "confirm", "contradict"]);
  assert.deepEqual(await texts(page, `${scope} .rev-head .ledger-agent`), ["alice", "bob", "carol", "dave"]);
  assert.deepEqual(await texts(page, `${scope} .rev-via`), ["via api", "via api", "via api", "via api"]);
  assert.deepEqual(await texts(page, `${scope} .rev-value`), ["1 December", "1 December", "1 December", "not before 5 December"]);
  assert.deepEqual(await texts(page, `${scope} .rev-quote`), ["delivery on **1 December**", "Not before 5 December"], "quotes are shown as text, not markdown");
  assert.equal(await revisions.nth(0).locator("time").count(), 1);
  assert.deepEqual(await texts(page, `${scope} .rev-source .jump-msg`), [`message #${proposal}`, `message #${objection}`]);

  // "Jump to message" scrolls the feed to the source message and highlights it.
  const feed = page.locator(".feed-scroll");
  await feed.evaluate((el) => (el.scrollTop = el.scrollHeight));
  await revisions.nth(0).locator(".jump-msg").click();
  await page.locator(`#m${proposal}.msg-flash`).waitFor({ timeout: 5_000 });
  assert.ok(await page.locator(`#m${proposal}`).isVisible());
  const inFeed = await page.locator(`#m${proposal}`).evaluate((el) => {
    const box = el.getBoundingClientRect();
    const view = el.closest(".feed-scroll")!.getBoundingClientRect();
    return box.top >= view.top - 1 && box.bottom <= view.bottom + 1;
  });
  assert.ok(inFeed, "the message is scrolled into the feed's view");

  // A new revision while the history is open shows up in it.
  await revise(room, tid, "bob", "confirm");
  await revisions.nth(4).waitFor({ timeout: 10_000 });
  assert.deepEqual(await texts(page, `${scope} .rev-kind`), ["propose", "confirm", "confirm", "contradict", "confirm"]);

  // Two handshakes on the current hash seal the ledger, live.
  const hash = await contextHash(room);
  assert.equal(await section.getAttribute("data-context-hash"), hash);
  assert.equal(await text(page, ".context-hash"), `${hash.slice(0, 16)}…`);
  assert.equal(await page.locator(".context-hash").getAttribute("title"), hash);
  // carol's handshake reaches the page as an event: the panel re-reads the context, which is not sealed.
  const reread = page.waitForResponse((r) => r.request().method() === "GET" && new URL(r.url()).pathname === `/api/rooms/${room}/context`);
  await handshake(room, "carol");
  const afterOne = (await (await reread).json()) as { sealed: unknown; context_hash: string };
  assert.equal(afterOne.context_hash, hash);
  assert.equal(afterOne.sealed, null, "one handshake does not seal");
  assert.equal(await section.getAttribute("data-sealed"), "false");
  await handshake(room, "bob");
  await page.locator('section.ledger[data-sealed="true"]').waitFor({ timeout: 10_000 });
  assert.equal(await text(page, ".ledger-seal dd"), "sealed by bob, carol");
  assert.equal(await text(page, ".seal-pill"), "sealed");

  assert.equal(await page.evaluate(() => (window as unknown as { __sameDocument?: number }).__sameDocument), 1, "no reload happened");
  assert.equal(streams.length, 1, `one event stream for the feed and the ledger: ${streams.join(", ")}`);
  assert.equal(await page.locator(".messages > li.msg").count(), 4, "the feed still shows the messages");

  fs.mkdirSync(RESULTS, { recursive: true });
  await page.screenshot({ path: path.join(RESULTS, "ledger.png"), fullPage: true });
  await section.screenshot({ path: path.join(RESULTS, "ledger-panel.png") });
  assert.deepEqual(problems, []);
  await page.close();
});

test("a page rendered after the fact shows every status, cancelled folded away, resolved discrepancies and untrusted text as text", async () => {
  const { uuid: room } = await createRoom("A fuller negotiation.");
  const m1 = await say(room, "buyer", "Budget is 12,000 EUR, delivery in Lyon.");
  const price = await open(room, "seller", "Price", "12,000 EUR", { source_msg_id: m1, quote: "Budget is 12,000 EUR" });
  await revise(room, price, "buyer", "confirm");
  await revise(room, price, "broker", "confirm");
  const venue = await open(room, "buyer", "Venue", "Lyon");
  await revise(room, venue, "seller", "confirm");
  await revise(room, venue, "broker", "confirm");
  await revise(room, venue, "seller", "contradict", { value: "Paris" });
  const did = (await api<{ discrepancies: { id: number }[] }>(`/api/rooms/${room}/context`)).discrepancies[0]!.id;
  await api(`/api/rooms/${room}/discrepancies/${did}/resolve`, { agent_id: "buyer" });
  const date = await open(room, "seller", "Delivery date", "15 January");
  await revise(room, date, "seller", "update", { value: "20 January" });
  const hack = await open(room, "mallory", XSS, `${XSS} **bold**`, { quote: "<script>window.__pwned=1</script>" });
  await revise(room, hack, "mallory", "retract");

  const { page, problems } = await newPage();
  await watch(page, room);
  const section = panel(page);
  assert.equal(await section.getAttribute("data-threads"), "4");
  assert.deepEqual(await texts(page, ".ledger-group > h3, .ledger-cancelled > summary"), ["Agreed 1", "Proposed 1", "Disputed 1", "Cancelled 1", "Discrepancies all resolved"]);
  assert.equal(await thread(page, price).getAttribute("data-status"), "agreed");
  assert.equal(await thread(page, venue).getAttribute("data-status"), "disputed");
  assert.equal(await thread(page, date).getAttribute("data-status"), "proposed");
  assert.equal(await text(page, `li.thread[data-thread-id="${date}"] .thread-value`), "20 January");
  assert.equal(await text(page, "li.discrepancy .disc-status"), "resolved");
  assert.equal(await text(page, "li.discrepancy .disc-meta"), "recorded by the server · resolved by buyer");

  // Cancelled threads are folded; untrusted text stays text.
  const cancelled = section.locator("details.ledger-cancelled");
  assert.equal(await cancelled.evaluate((el) => (el as HTMLDetailsElement).open), false);
  await cancelled.locator("summary").click();
  assert.equal(await text(page, `li.thread[data-thread-id="${hack}"] .thread-subject`), XSS);
  assert.equal(await text(page, `li.thread[data-thread-id="${hack}"] .thread-value`), `${XSS} **bold**`);
  await thread(page, hack).locator(".thread-toggle").click();
  await thread(page, hack).locator("li.revision").nth(1).waitFor({ timeout: 10_000 });
  assert.equal(await text(page, `li.thread[data-thread-id="${hack}"] .rev-quote`), "<script>window.__pwned=1</script>");
  assert.equal(await section.locator("img, script, strong").count(), 0);
  assert.equal(await page.evaluate(() => (window as unknown as { __pwned?: unknown }).__pwned), undefined);

  // The discrepancy's thread link opens that thread's history.
  await section.locator("li.discrepancy .disc-thread").click();
  await thread(page, venue).locator("li.revision").nth(3).waitFor({ timeout: 10_000 });
  assert.deepEqual(await texts(page, `li.thread[data-thread-id="${venue}"] .rev-kind`), ["propose", "confirm", "confirm", "contradict"]);

  // Screenshots with every status, desktop and phone.
  fs.mkdirSync(RESULTS, { recursive: true });
  await thread(page, price).locator(".thread-toggle").click();
  await thread(page, price).locator("li.revision").nth(2).waitFor({ timeout: 10_000 });
  await page.screenshot({ path: path.join(RESULTS, "ledger-statuses.png"), fullPage: true });
  const phone = await newPage({ width: 390, height: 844 });
  await watch(phone.page, room);
  await phone.page.locator(`li.thread[data-thread-id="${price}"] .thread-toggle`).click();
  await phone.page.locator(`li.thread[data-thread-id="${price}"] li.revision`).nth(2).waitFor({ timeout: 10_000 });
  await phone.page.screenshot({ path: path.join(RESULTS, "ledger-mobile.png"), fullPage: true });
  await phone.page.locator("section.ledger").screenshot({ path: path.join(RESULTS, "ledger-mobile-panel.png") });
  assert.ok(
    await phone.page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth),
    "nothing overflows the phone's width",
  );
  assert.deepEqual(phone.problems, []);
  await phone.page.close();
  assert.deepEqual(problems, []);
  await page.close();
});

test("jump to message loads the messages between the source and the feed's oldest, or says it is too far back", async () => {
  const { uuid: room } = await createRoom("A long conversation before anything is settled.");
  const ids: number[] = [];
  for (let i = 1; i <= 400; i++) ids.push(await say(room, i % 2 ? "alice" : "bob", `message number ${i}`));
  const near = await open(room, "alice", "Near", "a value from a little earlier", { source_msg_id: ids[300]! });
  const far = await open(room, "alice", "Far", "a value from the start", { source_msg_id: ids[1]! });

  const { page, problems } = await newPage();
  await watch(page, room);
  assert.equal(await page.locator(".messages > li.msg").count(), 50);
  assert.equal(await page.locator(`#m${ids[300]}`).count(), 0, "not rendered at first");

  await thread(page, far).locator(".thread-toggle").click();
  await thread(page, far).locator(".jump-msg").click();
  const note = thread(page, far).locator(".jump-note");
  await note.waitFor({ timeout: 10_000 });
  assert.match((await note.textContent())!, new RegExp(`Message #${ids[1]} is far back in the room: use “Load older messages”`));
  assert.equal(await page.locator(`#m${ids[1]}`).count(), 0);
  assert.equal(await page.locator(".messages > li.msg").count(), 50, "nothing was loaded");

  await thread(page, near).locator(".thread-toggle").click();
  await thread(page, near).locator(".jump-msg").click();
  await page.locator(`#m${ids[300]}.msg-flash`).waitFor({ timeout: 10_000 });
  assert.equal(await page.locator(".messages > li.msg").count(), 100, "the 50 messages in between were loaded, the feed stays contiguous");
  assert.ok(await page.locator(`#m${ids[300]}`).isVisible());
  assert.equal(await page.getByRole("button", { name: "Load older messages" }).count(), 1);

  assert.deepEqual(problems, []);
  await page.close();
});

test("with an arbiter configured the panel offers “Refresh ledger”, shows why a refresh failed, then what the arbiter found", async () => {
  // A server of its own whose arbiter talks to a fake provider (the one stand-in): the refresh
  // route, the extraction and the page are the real ones.
  const llm = await startFakeLlm();
  let withArbiter: BrowserFixture | undefined;
  try {
    withArbiter = await startBrowserFixture({ env: arbiterEnv(llm) });
    const call = withArbiter.api;
    const { uuid: room } = await call<{ uuid: string }>("/api/rooms", { description: "Arbiter errors." });
    const said = (await call<{ id: number }>(`/api/rooms/${room}/messages`, { agent_id: "alice", text: "Let's say 40 EUR per hour." })).id;

    const { page, problems } = await openPage(withArbiter.browser, withArbiter.running.url);
    await watch(page, room);
    // A ledger with nothing in it yet is folded to its title bar: the watcher opens it first.
    assert.equal(await panel(page).getAttribute("data-idle"), "true");
    await panel(page).locator("details.panel-fold > summary").click();
    const button = panel(page).getByRole("button", { name: "Refresh ledger" });
    assert.equal(await button.count(), 1);
    assert.match(await text(page, ".ledger-lead"), /The arbiter can also find them in the conversation\.$/);
    const refreshed = () => page.waitForResponse((r) => r.request().method() === "POST" && new URL(r.url()).pathname === `/api/rooms/${room}/context/refresh`);

    // The provider is down: every attempt fails, the route answers 502 and the panel says why.
    llm.setHandler(() => ({ status: 503 }));
    let answered = refreshed();
    await button.click();
    const failed = await answered;
    assert.equal(failed.status(), 502);
    const failure = (await failed.json()) as { code: string; detail: string };
    assert.equal(failure.code, "arbiter_failed");
    assert.match(failure.detail, /HTTP 503/);
    const alert = panel(page).locator(".ledger-alert");
    await alert.waitFor({ timeout: 10_000 });
    assert.equal(await text(page, ".ledger-alert"), `Could not refresh the ledger: ${failure.detail}`);
    assert.ok(llm.count >= 1, "the provider was asked");
    assert.ok(
      llm.calls.every((c) => c.data.messages.some((m) => m.id === said)),
      "each attempt carried alice's message",
    );
    assert.equal(await panel(page).getAttribute("data-threads"), "0");
    fs.mkdirSync(RESULTS, { recursive: true });
    await panel(page).screenshot({ path: path.join(RESULTS, "ledger-refresh-error.png") });

    // The provider is back and finds the rate in alice's message: the thread appears, the error goes.
    const asked = llm.count;
    llm.setHandler(() =>
      answer({
        threads: [{ subject: "Hourly rate", subject_key: subjectKey("Hourly rate"), value: "40 EUR", source_msg_id: said, quote: "40 EUR per hour" }],
        revisions: [],
        discrepancies: [],
      }),
    );
    answered = refreshed();
    await button.click();
    assert.equal((await answered).status(), 200);
    await panel(page).locator("li.thread .thread-subject", { hasText: "Hourly rate" }).waitFor({ timeout: 10_000 });
    const tid = Number(await panel(page).locator("li.thread").first().getAttribute("data-thread-id"));
    assert.equal(await text(page, `li.thread[data-thread-id="${tid}"] .thread-value`), "40 EUR");
    assert.equal(await alert.count(), 0, "the error is gone after a successful refresh");
    assert.equal(await text(page, ".ledger-refreshed"), "· refreshed: 1 message read, 1 change applied");
    assert.equal(llm.count, asked + 1, "one call read the one message");
    assert.deepEqual(problems, []);
    await page.close();
  } finally {
    await withArbiter?.close();
    await llm.close();
  }
});
