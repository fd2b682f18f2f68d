/**
 * The watcher's integrity panel in a real browser: the shared verifier (lib/log/verify.ts) runs in
 * Chromium over the room's export, CLEAN for an honest room, REFUTED once the SQLite file is edited
 * behind the server's back (the log, or only the messages table).
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import Database from "better-sqlite3";
import type { Browser, Page } from "playwright-core";
import { bytesToHex, utf8 } from "../../lib/log/bytes";
import { nobleSign, noblePublicKey } from "../../lib/log/ed25519";
import { agentEnvelope } from "../../lib/log/event";
import { openPage, startBrowserFixture, type BrowserFixture, type JsonApi } from "../helpers/browser";
import { type RunningServer } from "../../server";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const RESULTS = path.join(ROOT, "test-results");

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

const post = (room: string, agent_id: string, text: string, extra: Record<string, unknown> = {}) =>
  api<{ id: number }>(`/api/rooms/${room}/messages`, { agent_id, text, ...extra });

/** What an agent with `seed` sends as `sig` for the message `{text}` (SPEC 4.4). */
function signMessage(seed: Uint8Array, room: string, actor: string, text: string) {
  const ts = new Date().toISOString();
  const nonce = crypto.randomBytes(12).toString("hex");
  const signature = nobleSign(seed, utf8(agentEnvelope({ room, type: "message.posted", actor, payload: { text }, ts, nonce })));
  return { pubkey_hex: bytesToHex(noblePublicKey(seed)), signature_hex: bytesToHex(signature), ts, nonce };
}

/** Edits behind the server's back, in its own SQLite file. */
function tamper(sql: string, ...params: unknown[]): void {
  const db = new Database(path.join(running.svc.config.dataDir, "parley.db"));
  try {
    const changes = db.prepare(sql).run(...params).changes;
    assert.equal(changes, 1, `tamper: ${sql}`);
  } finally {
    db.close();
  }
}

/** A page that fails the test on script errors and CSP violations (eval and WebAssembly included). */
const newPage = () => openPage(browser, running.url);

const panel = (page: Page) => page.locator("section.integrity");

/** Waits for the panel's verdict (the panel verifies small rooms by itself after load). */
async function verdict(page: Page): Promise<string> {
  await panel(page).locator(".verdict[data-verdict=CLEAN], .verdict[data-verdict=REFUTED], .verdict[data-verdict=INCONCLUSIVE]").waitFor({ timeout: 20_000 });
  return (await panel(page).locator(".verdict").textContent())!.trim();
}

/** The text of the "what was checked" line titled `title`, and its mark. */
async function check(page: Page, title: string): Promise<{ mark: string; text: string }> {
  const line = panel(page).locator(".check", { has: page.locator(".check-title", { hasText: title }) });
  return { mark: (await line.getAttribute("data-mark")) ?? "", text: (await line.locator(".check-text").textContent())!.trim() };
}

/** data-verify-ms, which the benchmark reads: present and a finite number (its size is not a test matter). */
async function verifyMsOf(page: Page): Promise<number> {
  const raw = await panel(page).getAttribute("data-verify-ms");
  assert.ok(raw !== null && raw.trim() !== "" && Number.isFinite(Number(raw)), `data-verify-ms=${raw}`);
  return Number(raw);
}

const failureSeqs = async (page: Page) => (await panel(page).locator(".failure-seq").allTextContents()).map((s) => s.trim());
const failureTypes = async (page: Page) => (await panel(page).locator(".failure-type").allTextContents()).map((s) => s.trim());

// ---------- the room under test ----------

let room: string;
let signedSeq: number;
let unsignedSeq: number;
const SIGNED_TEXT = "I can deliver the parts on 1 December.";
const UNSIGNED_TEXT = "Agreed: 1 December, at the north gate.";

test("an honest room verifies CLEAN in the browser, showing what was checked, and its log and checkpoint download", async () => {
  room = (await api<{ uuid: string }>("/api/rooms", { description: "Agree on a delivery date for the parts." })).uuid;
  const seed = crypto.randomBytes(32);
  await post(room, "bob", "We need the parts by **Friday**.");
  signedSeq = (await post(room, "alice", SIGNED_TEXT, { sig: signMessage(seed, room, "alice", SIGNED_TEXT) })).id;
  unsignedSeq = (await post(room, "bob", UNSIGNED_TEXT)).id;
  await post(room, "carol", "Noted, I'll book the truck.");
  const events = 5; // room.created and four messages

  const { page, problems } = await newPage();
  await page.goto(`${running.url}/${room}`);
  assert.equal(await verdict(page), "CLEAN");
  const section = panel(page);
  assert.match((await section.locator(".integrity-explanation").textContent())!, /All 5 events/);
  assert.equal(await section.getAttribute("data-verdict"), "CLEAN");

  const ev = await check(page, "Events");
  assert.equal(ev.mark, "ok");
  assert.match(ev.text, new RegExp(`^${events} events: .*${events} leaf hashes recomputed; ${events} of ${events} prev links match`));
  const cps = await check(page, "Checkpoints");
  assert.equal(cps.mark, "ok");
  assert.match(cps.text, new RegExp(`^${events} signed checkpoints`));
  const sigs = await check(page, "Agent signatures");
  assert.equal(sigs.mark, "ok");
  assert.match(sigs.text, /^1 agent signature checked, with key pinning and replayed nonces$/);
  const proj = await check(page, "Projections");
  assert.equal(proj.mark, "ok");
  assert.match(proj.text, /^4 messages and the room's counters as served, compared with a replay of the log$/);
  const head = await check(page, "Head");
  const served = await api<{ head: { size: number; root: string } }>(`/api/rooms/${room}`);
  assert.match(head.text, new RegExp(`^size ${events} · root `));
  assert.ok(served.head.root.startsWith((await section.locator(".check code.root").textContent())!.replace("…", "")), "the root prefix is the served head's");
  const key = await api<{ pubkey_hex: string; key_name: string }>("/api/server-key");
  assert.match((await check(page, "Server key")).text, new RegExp(`^${key.key_name.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")} · ${key.pubkey_hex.slice(0, 16)}…`));
  assert.equal(await section.locator(".failure").count(), 0);

  // Which Ed25519 ran, and how long it took: on the page and in data-verify-ms (the benchmark reads it).
  const impl = await section.getAttribute("data-ed25519");
  assert.ok(impl === "WebCrypto" || impl === "noble", `data-ed25519=${impl}`);
  // Chromium ships Ed25519 in WebCrypto from version 137: there the fallback must not run.
  if (Number(browser.version().split(".")[0]) >= 137) assert.equal(impl, "WebCrypto");
  const verifyMs = await verifyMsOf(page);
  const meta = (await section.locator(".integrity-meta").textContent())!;
  // The panel names the implementation that data-ed25519 reports, and the duration it measured.
  const named = impl === "WebCrypto" ? /^Checked in this browser with WebCrypto Ed25519 in [\d.,]+ ms/ : /^Checked in this browser with @noble\/ed25519 \(WebCrypto Ed25519 unavailable\) in [\d.,]+ ms/;
  assert.match(meta.replace(/\s+/g, " ").trim(), named);
  console.log(`# in-browser verify of ${events} events: ${verifyMs} ms with ${impl} (Chromium ${browser.version()})`);

  // The download links: same-origin, with the download attribute, and they answer.
  const bundleLink = section.getByRole("link", { name: "Download the log (JSON)" });
  const checkpointLink = section.getByRole("link", { name: "Download the current checkpoint" });
  assert.equal(await bundleLink.getAttribute("href"), `/api/rooms/${room}/export`);
  assert.equal(await checkpointLink.getAttribute("href"), `/api/rooms/${room}/checkpoint`);
  assert.ok(await bundleLink.getAttribute("download"));
  assert.ok(await checkpointLink.getAttribute("download"));
  const bundleRes = await page.request.get(running.url + (await bundleLink.getAttribute("href"))!);
  assert.equal(bundleRes.status(), 200);
  assert.equal(((await bundleRes.json()) as { events: unknown[] }).events.length, events);
  const checkpointRes = await page.request.get(running.url + (await checkpointLink.getAttribute("href"))!);
  assert.equal(checkpointRes.status(), 200);
  assert.match(await checkpointRes.text(), new RegExp(`/room/${room}\n${events}\n`));

  // The button runs it again, with the same answer.
  await section.getByRole("button", { name: "Verify again" }).click();
  assert.equal(await verdict(page), "CLEAN");

  fs.mkdirSync(RESULTS, { recursive: true });
  await section.scrollIntoViewIfNeeded();
  await page.screenshot({ path: path.join(RESULTS, "integrity.png"), fullPage: true });
  await section.screenshot({ path: path.join(RESULTS, "integrity-clean.png") });
  assert.deepEqual(problems, []);
  await page.close();
});

test("a checkpoint the visitor kept: consistent with the log now, malformed is INCONCLUSIVE", async () => {
  const kept = await (await fetch(`${running.url}/api/rooms/${room}/checkpoint`)).text();
  await post(room, "carol", "One more after the checkpoint was kept.");
  const { page, problems } = await newPage();
  await page.goto(`${running.url}/${room}`);
  assert.equal(await verdict(page), "CLEAN");
  const section = panel(page);
  await section.locator("details.kept summary").click();
  await section.getByLabel("A checkpoint you kept").fill(kept.replace(/\n/g, "\r\n"));
  await section.getByRole("button", { name: "Verify against this checkpoint" }).click();
  await section.locator(".check-title", { hasText: "Your checkpoint" }).waitFor({ timeout: 20_000 });
  assert.equal(await verdict(page), "CLEAN");
  const yours = await check(page, "Your checkpoint");
  assert.equal(yours.mark, "ok");
  assert.match(yours.text, /^size 5: the current log is consistent with it/);

  await section.getByLabel("A checkpoint you kept").fill("not a checkpoint");
  await section.getByRole("button", { name: "Verify against this checkpoint" }).click();
  await page.locator("section.integrity[data-verdict=INCONCLUSIVE]").waitFor({ timeout: 20_000 });
  assert.match((await section.locator(".inconclusive").textContent())!, /not a well-formed signed note/);
  assert.deepEqual(problems, []);
  await page.close();
});

test("without WebCrypto Ed25519 the panel falls back to @noble/ed25519, with the same verdict", async () => {
  const { page, problems } = await newPage();
  await page.addInitScript(() => {
    const subtle = window.crypto.subtle;
    const importKey = subtle.importKey.bind(subtle);
    subtle.importKey = ((...args: Parameters<SubtleCrypto["importKey"]>) => {
      const alg = args[2] as { name?: string } | string;
      if ((typeof alg === "string" ? alg : alg.name) === "Ed25519") return Promise.reject(new DOMException("Unrecognized name", "NotSupportedError"));
      return importKey(...args);
    }) as SubtleCrypto["importKey"];
  });
  await page.goto(`${running.url}/${room}`);
  assert.equal(await verdict(page), "CLEAN");
  assert.equal(await panel(page).getAttribute("data-ed25519"), "noble");
  assert.match((await panel(page).locator(".integrity-meta").textContent())!, /with @noble\/ed25519 \(WebCrypto Ed25519 unavailable\) in /);
  assert.deepEqual(problems, []);
  await page.close();
});

test("a message edited in the SQLite log is REFUTED in the browser, naming its seq; an edit to the messages table alone too", async () => {
  const { page, problems } = await newPage();

  // (b) The signed message, edited in the log: its agent signature, the next prev link and every
  // signed root from there on no longer match.
  tamper("UPDATE events SET payload = json_set(payload, '$.text', ?) WHERE room = ? AND seq = ?", "I can deliver the parts on 9 December.", room, signedSeq);
  await page.goto(`${running.url}/${room}`);
  assert.equal(await verdict(page), "REFUTED");
  const section = panel(page);
  assert.match((await section.locator(".integrity-explanation").textContent())!, new RegExp(`does not check out .* at seq ${signedSeq}\\b`));
  const seqs = await failureSeqs(page);
  assert.equal(seqs[0], `seq ${signedSeq}`, `first failures: ${seqs.join(", ")}`);
  assert.ok(seqs.includes(`seq ${signedSeq + 1}`), "the next event's prev link is named too");
  const types = await failureTypes(page);
  for (const type of ["agent_signature", "checkpoint_root", "prev_link"]) assert.ok(types.includes(type), `${type} in ${types.join(", ")}`);
  assert.equal((await check(page, "Events")).mark, "fail");
  assert.equal((await check(page, "Checkpoints")).mark, "fail");
  const sigs = await check(page, "Agent signatures");
  assert.equal(sigs.mark, "fail");
  assert.match(sigs.text, /— 1 failure$/);
  await verifyMsOf(page);
  await section.scrollIntoViewIfNeeded();
  await section.screenshot({ path: path.join(RESULTS, "integrity-refuted.png") });

  // Put the text back: the log is honest again.
  tamper("UPDATE events SET payload = json_set(payload, '$.text', ?) WHERE room = ? AND seq = ?", SIGNED_TEXT, room, signedSeq);
  await section.getByRole("button", { name: "Verify again" }).click();
  await page.locator("section.integrity[data-verdict=CLEAN]").waitFor({ timeout: 20_000 });

  // (c) Only the projection: the messages table the feed reads, the log untouched.
  tamper("UPDATE messages SET text = ? WHERE room = ? AND seq = ?", "Agreed: 3 December, at the south gate.", room, unsignedSeq);
  await page.reload();
  assert.equal(await verdict(page), "REFUTED");
  assert.deepEqual(await failureSeqs(page), [`seq ${unsignedSeq}`]);
  assert.deepEqual(await failureTypes(page), ["projection"]);
  assert.match((await section.locator(".failure-detail").textContent())!, new RegExp(`message ${unsignedSeq} as served differs from the log`));
  assert.equal((await check(page, "Projections")).mark, "fail");
  assert.equal((await check(page, "Events")).mark, "ok");
  assert.equal((await check(page, "Checkpoints")).mark, "ok");
  await section.scrollIntoViewIfNeeded();
  await page.screenshot({ path: path.join(RESULTS, "integrity-refuted-page.png"), fullPage: true });
  assert.deepEqual(problems, []);
  await page.close();
});
