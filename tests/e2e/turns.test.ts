/**
 * Turns mode in a real browser (issue 6): a turns room created with the form on `/`, and its
 * watcher following the conversation live over the page's one event stream while agents claim
 * and reply through the REST API: the turn moves from agent to agent, the round advances, a
 * completion is proposed and confirmed, and the room ends completed. A second room shows the
 * delay countdown, an absent participant, max_rounds, the owner's resume and cancel.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import type { Browser, Page } from "playwright-core";
import { openPage, startBrowserFixture, type BrowserFixture, type JsonApi } from "../helpers/browser";
import { client } from "../helpers/server";
import { type RunningServer } from "../../server";

const ROOT = path.resolve(import.meta.dirname, "../..");
const RESULTS = path.join(ROOT, "test-results");
const XSS = `<img src=x onerror="window.__pwned=1">`;

let fx: BrowserFixture;
let running: RunningServer;
/** The server's clock runs this far ahead of the real one: a test moves it to time a turn out. */
let clockOffset = 0;
let browser: Browser;
let api: JsonApi;
const streams: string[] = [];

before(
  async () => {
    fx = await startBrowserFixture({ clock: { now: () => Date.now() + clockOffset } });
    ({ running, browser, api } = fx);
  },
  { timeout: 600_000 },
);

after(async () => {
  await fx?.close();
});

// ---------- helpers ----------

interface CurrentTurn {
  id: number;
  agent_id: string;
  phase: "dialogue" | "confirm";
  round: number;
  status: string;
}

const current = async (room: string) => (await api<{ current: CurrentTurn | null }>(`/api/rooms/${room}/turns/current`)).current!;

/** The open turn must be `agent`'s: claim it (retrying while it has not opened yet) and reply. */
async function takeTurn(room: string, agent: string, say: string, result: "continue" | "complete" | "pass" = "continue", page?: Page) {
  const turn = await current(room);
  assert.equal(turn.agent_id, agent, `it is ${agent}'s turn`);
  let claim: { status: number; body: { lease_token: string } };
  for (let tries = 0; ; tries++) {
    claim = await client(running.url).post(`/api/rooms/${room}/turns/${turn.id}/claim`, { agent_id: agent });
    if (claim.status !== 409 || tries > 50) break;
    await new Promise((r) => setTimeout(r, 200)); // not open yet (delay_s)
  }
  assert.equal(claim.status, 200, JSON.stringify(claim.body));
  if (page) {
    // The claim shows on the watcher: the lease countdown replaces the claim countdown.
    await page.locator(`.turns-current[data-turn-id="${turn.id}"][data-turn-status="claimed"]`).waitFor({ timeout: 10_000 });
    assert.match(await text(page, ".turns-countdown"), /^claimed · replying, \d+ min \d\d s left on the lease$/);
  }
  await api(`/api/rooms/${room}/turns/${turn.id}/reply`, { agent_id: agent, lease_token: claim.body.lease_token, text: say, result });
  return turn;
}

const text = async (page: Page, selector: string) => ((await page.locator(selector).first().textContent()) ?? "").replace(/\s+/g, " ").trim();

/** Waits until the panel shows `agent`'s turn (highlighted, and in the current-turn box) in `round`. */
async function turnOf(page: Page, agent: string, round: number, phase: "dialogue" | "confirm" = "dialogue") {
  const panel = page.locator(`section.turns-panel[data-current-agent="${agent}"][data-round="${round}"]`);
  await panel.waitFor({ timeout: 10_000 });
  await panel.locator(`.turns-current[data-agent="${agent}"][data-phase="${phase}"]`).waitFor({ timeout: 10_000 });
  const highlighted = await page.locator(".turns-participant[data-current]").evaluateAll((els) => els.map((e) => e.getAttribute("data-agent")));
  assert.deepEqual(highlighted, [agent], `only ${agent} is highlighted`);
  assert.equal(await page.locator(`.turns-participant[data-agent="${agent}"]`).getAttribute("aria-current"), "step");
}

/** A page that fails the test on script errors and CSP violations, and logs its event streams in `streams`. */
async function newPage(): Promise<{ page: Page; problems: string[] }> {
  const opened = await openPage(browser, running.url);
  opened.page.on("request", (r) => {
    if (/\/api\/rooms\/[^/]+\/events/.test(r.url())) streams.push(r.url());
  });
  return opened;
}

const live = (page: Page) => page.locator('.live-indicator[data-state="live"]').waitFor({ timeout: 15_000 });
const sameDocument = (page: Page) => page.evaluate(() => (window as unknown as { __sameDocument?: number }).__sameDocument);

// ---------- tests ----------

test("a turns room made with the form: the watcher follows the turns from agent to agent, the proposal and the completion live", async () => {
  const { page, problems } = await newPage();
  await page.goto(running.url + "/");

  // The turns fields appear only with the turns mode; the supervisor only with its policy.
  assert.equal(await page.locator("#turns-participants").count(), 0);
  await page.fill("#description", "Agree on a name for the parser.");
  await page.selectOption("#mode", "turns");
  await page.locator("#turns-participants").waitFor();
  assert.equal(await page.locator("#turns-supervisor").count(), 0);
  await page.selectOption("#turns-policy", "supervisor");
  await page.fill("#turns-participants", "planner");
  assert.deepEqual(await page.locator("#turns-supervisor option").allTextContents(), ["Choose a participant…", "planner"]);

  // The API's validation errors are shown as the form shows any error.
  await page.click('button[type="submit"]');
  const error = page.locator(".create-form .error-text");
  await error.waitFor({ timeout: 10_000 });
  assert.match(await text(page, ".create-form .error-text"), /turns\.participants: must list at least 2 agents/);
  await page.selectOption("#turns-policy", "consensus");
  await page.fill("#turns-participants", "planner, builder");
  await page.fill("#turns-max-rounds", "500");
  await page.click('button[type="submit"]');
  await page.locator(".create-form .error-text", { hasText: "turns.max_rounds: must be at most 200" }).waitFor({ timeout: 10_000 });

  // Three participants, comma and newline separated.
  await page.fill("#turns-participants", "planner, builder\nreviewer\n");
  await page.fill("#turns-max-rounds", "3");
  await page.fill("#turns-timeout", "600");
  await page.fill("#turns-delay", "0");
  await page.click('button[type="submit"]');
  const url = (await page.locator("#room-url").textContent({ timeout: 10_000 }))!.trim();
  const room = url.slice(running.url.length + 1);
  // One line per participant, each naming the agent_id it must use.
  for (const [i, agent] of ["planner", "builder", "reviewer"].entries()) {
    assert.match((await page.locator(`#agent-instruction-${i}`).textContent())!, new RegExp(`${url} as "${agent}" \\(your agent_id\\)`));
  }
  const info = await api<{ mode: string }>(`/api/rooms/${room}`);
  assert.equal(info.mode, "turns");
  const state = await api<{ participants: { agent_id: string }[]; max_rounds: number; turn_timeout_s: number; delay_s: number; policy: string }>(
    `/api/rooms/${room}/turns/current`,
  );
  assert.deepEqual(
    state.participants.map((p) => p.agent_id),
    ["planner", "builder", "reviewer"],
  );
  assert.deepEqual([state.max_rounds, state.turn_timeout_s, state.delay_s, state.policy], [3, 600, 0, "consensus"]);

  // The watcher: the participants in order, planner's turn, round 1 of 3, a claim countdown.
  await page.click("text=Open the watcher");
  await page.waitForURL(url);
  await live(page);
  await page.evaluate(() => ((window as unknown as { __sameDocument: number }).__sameDocument = 1));
  const panel = page.locator("section.turns-panel");
  assert.equal(await panel.getAttribute("data-status"), "active");
  assert.equal(await text(page, ".turns-status"), "active");
  assert.deepEqual(await page.locator(".turns-participant").evaluateAll((els) => els.map((e) => e.getAttribute("data-agent"))), ["planner", "builder", "reviewer"]);
  assert.deepEqual(await page.locator(".turns-participant").evaluateAll((els) => els.map((e) => e.getAttribute("data-status"))), ["active", "active", "active"]);
  await turnOf(page, "planner", 1);
  assert.equal(await text(page, ".turns-round"), "Round 1 of 3");
  assert.match(await text(page, ".turns-countdown"), /^waiting for the claim · (9|10) min \d\d s left to claim$/);
  // The countdown ticks by itself.
  const before = await text(page, ".turns-countdown");
  await page.waitForFunction((was) => document.querySelector(".turns-countdown")?.textContent !== was, before, { timeout: 5000 });
  assert.match(await text(page, ".turns-rules"), /Finish by consensus · 3 active participants · 10 min 00 s per turn · absent after 2 missed turns/);

  // Round 1: planner → builder → reviewer, each claim and each reply shown live.
  await takeTurn(room, "planner", `I suggest **quill**. ${XSS}`, "continue", page);
  await turnOf(page, "builder", 1);
  await takeTurn(room, "builder", "Or *parsnip*?", "continue", page);
  await turnOf(page, "reviewer", 1);
  await takeTurn(room, "reviewer", "quill reads better.", "pass", page);

  // Round 2 begins with planner again.
  await turnOf(page, "planner", 2);
  assert.equal(await text(page, ".turns-round"), "Round 2 of 3");
  assert.equal(await page.locator(".turns-proposal").count(), 0);

  // planner proposes to finish: builder, then reviewer, are asked to confirm.
  await takeTurn(room, "planner", "Then quill it is. Done?", "complete", page);
  await turnOf(page, "builder", 2, "confirm");
  assert.equal(await page.locator(".turns-proposal").getAttribute("data-by"), "planner");
  assert.equal(await text(page, ".turns-proposal-head"), "Completion proposed by planner");
  assert.equal(await text(page, ".turns-confirmed"), "nobody yet");
  assert.equal(await text(page, ".turns-pending"), "builder and reviewer");
  assert.match(await text(page, ".turns-current-head"), /^Confirm turn #\d+ of builder$/);
  assert.equal(await text(page, ".turns-participant[data-current] .turns-now"), "confirming");

  await takeTurn(room, "builder", "Agreed: quill.", "complete", page);
  await turnOf(page, "reviewer", 2, "confirm");
  assert.equal(await text(page, ".turns-confirmed"), "builder");
  assert.equal(await text(page, ".turns-pending"), "reviewer");
  await page.screenshot({ path: path.join(RESULTS, "turns-watcher-proposal.png"), fullPage: true });

  // The last confirmation completes the room.
  await takeTurn(room, "reviewer", "Agreed.", "complete");
  await page.locator('section.turns-panel[data-status="completed"]').waitFor({ timeout: 10_000 });
  assert.equal(await text(page, ".turns-status"), "completed");
  assert.equal(await panel.getAttribute("data-current-agent"), "");
  assert.equal(await page.locator(".turns-current").count(), 0, "no turn is open any more");
  assert.equal(await page.locator(".turns-participant[data-current]").count(), 0);
  assert.equal(await text(page, ".turns-proposal-head"), "Completion agreed by planner");
  assert.equal(await text(page, ".turns-confirmed"), "builder and reviewer");
  assert.equal(await page.locator(".turns-pending").count(), 0);
  assert.equal(await text(page, ".turns-reason"), "The conversation is complete: the proposal to finish was confirmed.");
  assert.equal(await text(page, ".turns-round"), "Round 2 of 3");

  // The feed has the kickoff card and every reply; agent text stayed text.
  await page.locator(".messages > li.msg", { hasText: "quill reads better." }).waitFor({ timeout: 10_000 });
  await page.locator(".messages > li.msg", { hasText: "Agreed." }).last().waitFor({ timeout: 10_000 });
  assert.equal(await page.locator(".messages > li.msg").count(), 7, "the kickoff card and the six replies");
  assert.ok((await page.locator(".messages > li.msg", { hasText: XSS }).count()) === 1, "agent text is shown as text");
  // Only the service's own message wears the service banner: chosen by the event's actor, never by its text.
  const service = page.locator(".messages > li.msg-service");
  assert.equal(await service.count(), 1, "the kickoff card, and no agent reply, is a service message");
  assert.equal(await service.getAttribute("data-actor"), "server");
  assert.equal(await service.locator(".badge-service").textContent(), "Parley service");
  assert.equal(await page.locator(".messages > li.msg:not(.msg-service) .badge-service").count(), 0, "agent messages never get the service badge");
  await page.screenshot({ path: path.join(RESULTS, "turns-watcher.png"), fullPage: true });

  assert.equal(await sameDocument(page), 1, "the page never reloaded");
  assert.equal(await page.evaluate(() => (window as unknown as { __pwned?: number }).__pwned), undefined);
  assert.equal(new Set(streams.filter((s) => s.includes(room))).size, 1, "one event stream for the whole page");
  assert.deepEqual(problems, []);
  await page.close();
});

test("the watcher shows a delayed turn opening, an absent participant, max_rounds, the owner's resume and cancel", async () => {
  const { uuid: room, owner_token: token } = await api<{ uuid: string; owner_token: string }>("/api/rooms", {
    description: "Three agents, one goes silent.",
    mode: "turns",
    turns: { participants: ["alpha", "beta", "gamma"], max_rounds: 1, turn_timeout_s: 10, delay_s: 2, absent_after: 1 },
  });
  const { page, problems } = await newPage();
  await page.goto(`${running.url}/${room}`);
  await live(page);
  await page.evaluate(() => ((window as unknown as { __sameDocument: number }).__sameDocument = 1));
  await turnOf(page, "alpha", 1);
  assert.equal(await text(page, ".turns-round"), "Round 1 of 1");
  assert.match(await text(page, ".turns-rules"), /· 10 s per turn · 2 s between turns · absent after 1 missed turn$/);

  // After alpha's reply, beta's turn opens after the delay: "opens in", then the claim countdown (no event in between).
  await takeTurn(room, "alpha", "Hello.");
  await turnOf(page, "beta", 1);
  await page.locator('.turns-countdown[data-clock="waiting"]').waitFor({ timeout: 5000 });
  assert.match(await text(page, ".turns-countdown"), /^opens in [12] s$/);
  await page.locator('.turns-countdown[data-clock="ready"]').waitFor({ timeout: 5000 });
  assert.match(await text(page, ".turns-countdown"), /^waiting for the claim · \d+ s left to claim$/);

  // beta never claims: past its deadline the sweeper skips the turn and beta is absent (absent_after 1).
  clockOffset += 15_000;
  await turnOf(page, "gamma", 1);
  await page.locator('.turns-participant[data-agent="beta"][data-status="absent"]').waitFor({ timeout: 10_000 });
  assert.equal(await text(page, '.turns-participant[data-agent="beta"] .badge-closed'), "absent");
  assert.match(await text(page, ".turns-rules"), /2 active participants/);

  // gamma's reply ends the only round: blocked, max_rounds.
  await takeTurn(room, "gamma", "Still here.");
  await page.locator('section.turns-panel[data-status="blocked"]').waitFor({ timeout: 10_000 });
  assert.equal(await text(page, ".turns-status"), "blocked");
  assert.equal(await text(page, ".turns-reason"), "Round 1 of 1 is over and no round is left. The owner can raise max_rounds and resume the room.");
  assert.equal(await page.locator(".turns-current").count(), 0);

  // The owner raises max_rounds and resumes: round 2 of 2, alpha again (beta is skipped while absent).
  await api(`/api/rooms/${room}/turns/max-rounds`, { max_rounds: 2 }, { token });
  await page.locator(".turns-round", { hasText: "Round 1 of 2" }).waitFor({ timeout: 10_000 });
  await api(`/api/rooms/${room}/turns/resume`, {}, { token });
  await page.locator('section.turns-panel[data-status="active"]').waitFor({ timeout: 10_000 });
  await turnOf(page, "alpha", 2);
  assert.equal(await text(page, ".turns-round"), "Round 2 of 2");

  // The owner reinstates beta, then cancels the room.
  await api(`/api/rooms/${room}/turns/reinstate`, { agent_id: "beta" }, { token });
  await page.locator('.turns-participant[data-agent="beta"][data-status="active"]').waitFor({ timeout: 10_000 });
  await api(`/api/rooms/${room}/turns/cancel`, { reason: "Enough for today." }, { token });
  await page.locator('section.turns-panel[data-status="cancelled"]').waitFor({ timeout: 10_000 });
  assert.equal(await text(page, ".turns-status"), "cancelled");
  assert.equal(await text(page, ".turns-reason"), "The owner cancelled the room: Enough for today.");
  assert.equal(await page.locator(".turns-current").count(), 0);

  assert.equal(await sameDocument(page), 1, "the page never reloaded");
  assert.deepEqual(problems, []);
  await page.close();
});

test("an open room has no turns panel", async () => {
  const { uuid } = await api<{ uuid: string }>("/api/rooms", { description: "open" });
  const { page, problems } = await newPage();
  await page.goto(`${running.url}/${uuid}`);
  await live(page);
  assert.equal(await page.locator("section.turns-panel").count(), 0);
  assert.deepEqual(problems, []);
  await page.close();
});
