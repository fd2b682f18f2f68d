/**
 * The watcher page's server render: the markup the server keeps for messages hydrates in place in
 * a real browser (React adopts it instead of rebuilding the feed), and what the page keeps per room
 * head (the newest messages, the board, the agent instructions) follows the room as it changes.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import type { Browser, Page } from "playwright-core";
import { openPage, startBrowserFixture, type BrowserFixture, type JsonApi } from "../helpers/browser";
import { testAgent } from "../helpers/agent";
import { feedMessagesJson, parseFeedMessages } from "../../components/feed-messages";
import { plural } from "../../components/format";
import { type RunningServer } from "../../server";

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

const post = (room: string, agent_id: string, text: string, extra: Record<string, unknown> = {}) =>
  api<{ id: number }>(`/api/rooms/${room}/messages`, { agent_id, text, ...extra });

/** The page's HTML as the server sends it, asked for with this Host (default: the server's own). */
function pageHtml(room: string, host?: string): Promise<{ status: number; html: string }> {
  const url = new URL(`/${room}`, running.url);
  return new Promise((resolve, reject) => {
    http
      .get(url, { headers: { accept: "text/html", ...(host ? { host } : {}) } }, (res) => {
        let html = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => (html += chunk));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, html }));
      })
      .on("error", reject);
  });
}

/** The ids of the messages in the server's HTML, in order. */
const idsInHtml = (html: string) => [...html.matchAll(/<li class="msg[^"]*" id="m(\d+)"/g)].map((m) => Number(m[1]));

/** The agent instructions as the page prints them (the text of its <pre>, entities decoded). */
function instructionsIn(html: string): string {
  const pre = /<pre[^>]*aria-label="Instructions for agents"[^>]*>([\s\S]*?)<\/pre>/.exec(html);
  assert.ok(pre, "the page prints the agent instructions");
  return pre[1]!.replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&quot;/g, '"').replace(/&#x27;/g, "'").replace(/&amp;/g, "&");
}

/**
 * Opens the watcher and records every message element (or message list) removed from the
 * document from the first byte on: hydration that fails throws the server's DOM away and builds
 * it again, which removes them; hydration in place removes none.
 */
async function openWatcher(room: string): Promise<{ page: Page; problems: string[]; errors: string[]; replaced: () => Promise<string[]> }> {
  const { page, problems } = await openPage(browser, running.url);
  const errors: string[] = [];
  page.on("console", (msg) => {
    if (msg.type() === "error") errors.push(msg.text());
  });
  await page.addInitScript(() => {
    const w = window as unknown as { __replaced: string[] };
    w.__replaced = [];
    new MutationObserver((records) => {
      for (const r of records) {
        for (const node of r.removedNodes) {
          if (node instanceof Element && (node.matches("li.msg, ol.messages") || node.querySelector("li.msg"))) w.__replaced.push(node.outerHTML.slice(0, 120));
        }
      }
    }).observe(document, { childList: true, subtree: true });
  });
  await page.goto(`/${room}`);
  await page.locator('.live-indicator[data-state="live"]').waitFor({ timeout: 15_000 });
  return { page, problems, errors, replaced: () => page.evaluate(() => (window as unknown as { __replaced: string[] }).__replaced) };
}

test("the feed's server markup hydrates in place: signed, replies, markup-like text, odd names", async () => {
  const { uuid: room } = await api<{ uuid: string }>("/api/rooms", { description: "render check" });
  const carol = testAgent();
  const texts = {
    bold: "**bold** and `code`, a [link](https://example.com)",
    markup: `<b>not bold</b> & "double" 'single' </li></ol><script>window.__pwned=1</script>`,
    signed: "signed by carol",
    reply: "answering the first one",
    fox: "a name that starts with an emoji",
  };
  const ids: number[] = [];
  ids.push((await post(room, "alice", texts.bold)).id);
  ids.push((await post(room, "bob", texts.markup)).id);
  ids.push((await post(room, "carol", texts.signed, { sig: carol.signMessage(room, "carol", { text: texts.signed }) })).id);
  ids.push((await post(room, "bob", texts.reply, { reply_to: ids[0] })).id);
  ids.push((await post(room, "🦊 fox", texts.fox)).id);

  // Twice: the first render writes the messages' markup, the second serves it kept.
  for (const round of ["first view", "second view"]) {
    const server = await pageHtml(room);
    assert.equal(server.status, 200);
    assert.deepEqual(idsInHtml(server.html), ids, `${round}: the server renders every message, in order`);
    assert.match(server.html, / UTC<\/time>/, `${round}: before hydration the times are UTC`);
    assert.ok(!server.html.includes("<b>not bold</b>"), `${round}: agent text is escaped in the server's markup`);

    const { page, problems, errors, replaced } = await openWatcher(room);
    // Hydrated: the markdown is rendered and the times are local.
    await page.locator(`#m${ids[0]} .msg-body strong`, { hasText: "bold" }).waitFor({ timeout: 10_000 });
    assert.deepEqual(await replaced(), [], `${round}: React kept the server's message elements`);
    assert.deepEqual(errors, [], `${round}: no hydration (or other) error in the console`);
    assert.deepEqual(problems, []);

    const items = page.locator(".messages > li.msg");
    assert.deepEqual(await items.evaluateAll((els) => els.map((e) => Number(e.id.slice(1)))), ids);
    assert.equal(await page.locator(`#m${ids[1]} .msg-body`).textContent(), texts.markup, "markup-like text stays text");
    assert.equal(await page.evaluate(() => (window as unknown as { __pwned?: number }).__pwned), undefined);
    assert.equal(await page.locator(`#m${ids[2]} .badge`).textContent(), "signed");
    assert.equal(await page.locator(`#m${ids[2]} .key-ref`).count(), 1);
    assert.equal(await page.locator(`#m${ids[3]} .reply-to`).getAttribute("href"), `#m${ids[0]}`);
    assert.equal(await page.locator(`#m${ids[4]} .avatar`).textContent(), "🦊");
    assert.ok(!(await page.locator(`#m${ids[0]} time`).textContent())!.endsWith("UTC"), "the browser switched the time to local");

    // A message that arrives live renders next to the hydrated ones.
    const live = (await post(room, "alice", `live after the ${round}`)).id;
    await page.locator(`#m${live}`).waitFor({ timeout: 10_000 });
    ids.push(live);
    assert.deepEqual(await items.evaluateAll((els) => els.map((e) => Number(e.id.slice(1)))), ids);
    await page.close();
  }
});

test("service messages (the kickoff card, a moderator note) hydrate in place with their banner", async () => {
  const { uuid: room, owner_token: token } = await api<{ uuid: string; owner_token: string }>("/api/rooms", {
    description: "turns render check",
    mode: "turns",
    turns: { participants: ["alpha", "beta"], max_rounds: 2 },
  });
  await api(`/api/rooms/${room}/turns/note`, { text: "A **note** from the owner." }, { token });
  for (const round of ["first view", "second view"]) {
    const { page, problems, errors, replaced } = await openWatcher(room);
    const service = page.locator(".messages > li.msg-service");
    await service.first().waitFor({ timeout: 10_000 });
    await page.locator(".messages > li.msg-service .msg-body strong", { hasText: "note" }).waitFor({ timeout: 10_000 });
    assert.equal(await service.count(), 2, `${round}: the kickoff card and the note`);
    assert.deepEqual(await service.evaluateAll((els) => els.map((e) => e.getAttribute("data-actor"))), ["server", "owner"]);
    assert.deepEqual(await replaced(), [], `${round}: React kept the server's message elements`);
    assert.deepEqual(errors, [], `${round}: no hydration (or other) error in the console`);
    assert.deepEqual(problems, []);
    await page.close();
  }
});

test("what the page keeps per room head follows the room: new messages, the board, the instructions, the Host", async () => {
  const { uuid: room, owner_token: token } = await api<{ uuid: string; owner_token: string }>("/api/rooms", { description: "keeps up" });
  const first = (await post(room, "alice", "the first message")).id;
  let page = await pageHtml(room);
  assert.deepEqual(idsInHtml(page.html), [first]);
  assert.ok(!instructionsIn(page.html).includes("## Tasks"), "no board section while the room has no task");

  // Seen again with nothing new: the same page.
  assert.deepEqual(idsInHtml((await pageHtml(room)).html), [first]);

  const second = (await post(room, "bob", "the second message")).id;
  page = await pageHtml(room);
  assert.deepEqual(idsInHtml(page.html), [first, second], "a new message is on the next view");
  assert.match(page.html, /2 messages/);

  const { task } = await api<{ task: { id: number } }>(`/api/rooms/${room}/tasks`, { agent_id: "planner", title: "Write the parser" });
  page = await pageHtml(room);
  assert.match(page.html, new RegExp(`data-task-id="${task.id}"`), "a new task is on the board of the next view");
  assert.ok(instructionsIn(page.html).includes("## Tasks"), "and the instructions now name the board");

  // The instructions print URLs of the origin the page was asked at (both loopback: allowed).
  const port = new URL(running.url).port;
  const byName = instructionsIn((await pageHtml(room, `localhost:${port}`)).html);
  const byAddress = instructionsIn((await pageHtml(room, `127.0.0.1:${port}`)).html);
  assert.ok(byName.includes(`http://localhost:${port}/api/rooms/${room}`), "asked as localhost: localhost URLs");
  assert.ok(!byName.includes(`http://127.0.0.1:${port}`));
  assert.ok(byAddress.includes(`http://127.0.0.1:${port}/api/rooms/${room}`), "asked as 127.0.0.1: 127.0.0.1 URLs");
  assert.ok(!byAddress.includes(`http://localhost:${port}`));

  await api(`/api/rooms/${room}/close`, {}, { token });
  page = await pageHtml(room);
  assert.ok(instructionsIn(page.html).includes("This room is closed"), "a closed room's instructions say so");
  assert.match(page.html, /closed · read-only/);
});

test("an unknown room and ids that are not room ids answer 404, with no feed", async () => {
  for (const id of ["00000000-0000-4000-8000-000000000000", "not-a-room", "00000000-0000-4000-8000-00000000000Z"]) {
    const page = await pageHtml(id);
    assert.equal(page.status, 404, id);
    assert.equal(idsInHtml(page.html).length, 0);
  }
});

test("the feed's wire format keeps every field the feed shows, and counts are grouped as in English", () => {
  const messages = [
    { id: 7, agent_id: 'a "quoted" name', text: "line\n</script><!-- -->", timestamp: "2026-12-01T10:00:00.000Z", reply_to: 3, auth: "signed" as const, key_ref: "0123456789abcdef", pubkey_hex: "ab".repeat(32) },
    { id: 9, agent_id: "b", text: "", timestamp: "2026-12-01T10:00:01.000Z", reply_to: null, auth: "anon" as const, key_ref: null, pubkey_hex: null },
  ];
  // A full message (hash, signature, mentions) sends only what the feed shows.
  const full = messages.map((m) => ({ ...m, hash: "f".repeat(64), mentions: ["x"], signature_hex: "e".repeat(128) }));
  assert.deepEqual(parseFeedMessages(feedMessagesJson(full)), messages);
  assert.ok(!feedMessagesJson(full).includes("f".repeat(64)));
  assert.deepEqual(parseFeedMessages(feedMessagesJson([])), []);
  for (const [n, text] of [[0, "0 messages"], [1, "1 message"], [999, "999 messages"], [1000, "1,000 messages"], [1234567, "1,234,567 messages"]] as const) {
    assert.equal(plural(n, "message"), text);
  }
});
