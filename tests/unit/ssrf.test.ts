// The webhook SSRF guard (SPEC 12) without PARLEY_WEBHOOK_ALLOW_PRIVATE: every class of address a
// URL could use to reach the server's own network is refused, in every spelling, at registration
// and at each attempt; the connection goes to the address that was checked; redirects are not
// followed; an answer is read only so far.
import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import { forbiddenAddress, parseWebhookUrl, postOnce, resolveTarget, WebhookTargetError, type Lookup } from "../../lib/webhooks/ssrf";

const REFUSED: [string, RegExp][] = [
  ["127.0.0.1", /loopback/],
  ["127.255.255.254", /loopback/],
  ["10.1.2.3", /private \(10/],
  ["172.16.0.1", /private \(172\.16/],
  ["172.31.255.255", /private \(172\.16/],
  ["192.168.1.1", /private \(192\.168/],
  ["169.254.169.254", /link-local.*metadata/],
  ["169.254.0.1", /link-local/],
  ["100.64.0.1", /carrier-grade NAT/],
  ["100.127.255.255", /carrier-grade NAT/],
  ["224.0.0.1", /multicast/],
  ["239.255.255.250", /multicast/],
  ["0.0.0.0", /unspecified/],
  ["0.1.2.3", /this network/],
  ["255.255.255.255", /broadcast/],
  ["240.0.0.1", /reserved/],
  ["::", /unspecified/],
  ["::1", /loopback/],
  ["0:0:0:0:0:0:0:1", /loopback/],
  ["fc00::1", /unique local/],
  ["fd12:3456:789a::1", /unique local/],
  ["fe80::1", /link-local \(fe80/],
  ["fe80::1%eth0", /link-local \(fe80/],
  ["febf::1", /link-local \(fe80/],
  ["ff02::1", /multicast/],
  ["::ffff:127.0.0.1", /loopback.*IPv4-mapped/],
  ["::ffff:7f00:1", /loopback.*IPv4-mapped/],
  ["::ffff:169.254.169.254", /link-local.*IPv4-mapped/],
  ["::ffff:10.0.0.1", /private.*IPv4-mapped/],
  ["::ffff:100.64.0.1", /carrier-grade.*IPv4-mapped/],
  ["::ffff:0.0.0.0", /unspecified.*IPv4-mapped/],
  ["::127.0.0.1", /loopback.*IPv4-compatible/],
  ["64:ff9b::7f00:1", /loopback.*NAT64/],
  ["2002:7f00:1::", /loopback.*6to4/],
  ["2001:0:4136:e378:8000:63bf:3fff:fdd2", /Teredo/],
];

const ALLOWED = ["8.8.8.8", "1.1.1.1", "93.184.216.34", "172.32.0.1", "100.128.0.1", "169.255.0.1", "2606:4700:4700::1111", "2a00:1450:4001:80b::200e", "::ffff:8.8.8.8"];

describe("address classes", () => {
  for (const [address, why] of REFUSED) {
    test(`${address} is refused`, () => {
      const reason = forbiddenAddress(address);
      assert.ok(reason, `${address} must be refused`);
      assert.match(reason, why);
    });
  }
  test("public unicast addresses pass", () => {
    for (const address of ALLOWED) assert.equal(forbiddenAddress(address), null, address);
  });
});

const guard = { allowPrivate: false };
const refusal = async (url: string, lookup?: Lookup) => {
  try {
    await resolveTarget(parseWebhookUrl(url), { ...guard, lookup });
  } catch (err) {
    assert.ok(err instanceof WebhookTargetError, String(err));
    return err.message;
  }
  assert.fail(`${url} was not refused`);
};

describe("URLs", () => {
  test("only http and https, without credentials", () => {
    for (const url of ["ftp://example.com/", "file:///etc/passwd", "gopher://example.com/", "javascript:alert(1)", "data:text/plain,x", "ws://example.com/"]) {
      assert.throws(() => parseWebhookUrl(url), /only http and https/, url);
    }
    assert.throws(() => parseWebhookUrl("https://user:pass@example.com/"), /user name or password/);
    assert.throws(() => parseWebhookUrl("not a url"), /not an absolute URL/);
    assert.equal(parseWebhookUrl("HTTPS://Example.COM/x").href, "https://example.com/x");
  });

  test("every spelling of a loopback or metadata address is refused", async () => {
    const spellings = [
      "http://127.0.0.1/", "http://2130706433/", "http://0x7f000001/", "http://0x7f.0.0.1/", "http://0177.0.0.1/", "http://127.1/",
      "http://[::1]/", "http://[::ffff:127.0.0.1]/", "http://[::ffff:7f00:1]/", "http://[0:0:0:0:0:ffff:7f00:1]/",
      "http://169.254.169.254/latest/meta-data/", "http://[::ffff:a9fe:a9fe]/", "http://0.0.0.0:3000/", "http://[fd00::1]/", "https://10.0.0.1:8443/",
    ];
    for (const url of spellings) assert.match(await refusal(url), /Webhooks cannot be sent to .*: it is /, url);
  });

  test("a host name that resolves to 127.0.0.1 is refused, naming the address (localhost, from the system resolver)", async () => {
    assert.match(await refusal("http://localhost:9/"), /localhost resolves to (127\.0\.0\.1|::1)\): it is loopback/);
  });

  test("a host is refused when any one of its addresses is forbidden", async () => {
    const lookup: Lookup = async () => [{ address: "93.184.216.34", family: 4 }, { address: "10.0.0.7", family: 4 }];
    assert.match(await refusal("https://mixed.example/", lookup), /mixed\.example resolves to 10\.0\.0\.7/);
  });

  test("a host that does not resolve is refused with the resolver's code", async () => {
    const lookup: Lookup = async () => {
      throw Object.assign(new Error("nope"), { code: "ENOTFOUND" });
    };
    assert.match(await refusal("https://nowhere.example/", lookup), /does not resolve \(ENOTFOUND\)/);
  });

  test("a public address passes and is the one connected to", async () => {
    const lookup: Lookup = async () => [{ address: "2606:4700:4700::1111", family: 6 }];
    assert.deepEqual(await resolveTarget(parseWebhookUrl("https://public.example/"), { ...guard, lookup }), { address: "2606:4700:4700::1111", family: 6 });
  });
});

describe("an attempt", () => {
  const hits: { url: string; host: string }[] = [];
  let server: http.Server;
  let port: number;
  before(async () => {
    server = http.createServer((req, res) => {
      hits.push({ url: req.url!, host: req.headers.host! });
      req.resume();
      if (req.url === "/redirect") {
        res.writeHead(302, { Location: `http://127.0.0.1:${port}/target` });
        return res.end();
      }
      if (req.url === "/silent") return; // never answers
      if (req.url === "/endless") {
        res.writeHead(200, { "Content-Type": "text/plain" });
        res.write("x".repeat(16 * 1024)); // and never ends
        return;
      }
      res.writeHead(204);
      res.end();
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    port = (server.address() as AddressInfo).port;
  });
  after(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  test("to a loopback URL is refused before any connection (localhost and 127.0.0.1)", async () => {
    hits.length = 0;
    for (const url of [`http://localhost:${port}/hook`, `http://127.0.0.1:${port}/hook`, `http://[::ffff:127.0.0.1]:${port}/hook`]) {
      const r = await postOnce(url, "{}", {}, guard);
      assert.equal(r.ok, false);
      assert.equal(r.status, null);
      assert.match(r.error!, /it is loopback/, url);
    }
    assert.equal(hits.length, 0, "nothing reached the receiver");
  });

  test("connects to the checked address, not to a second lookup (a rebinding name cannot move it)", async () => {
    hits.length = 0;
    let lookups = 0;
    // The name resolves once, to the receiver; a second lookup of `.invalid` would fail outright.
    const lookup: Lookup = async () => (lookups++ === 0 ? [{ address: "127.0.0.1", family: 4 }] : []);
    const r = await postOnce(`http://rebind.invalid:${port}/pinned`, "{}", {}, { allowPrivate: true, lookup });
    assert.equal(r.ok, true, r.error ?? "");
    assert.equal(r.status, 204);
    assert.equal(lookups, 1);
    assert.deepEqual(hits, [{ url: "/pinned", host: `rebind.invalid:${port}` }], "the request went to the checked address with the URL's host");
  });

  test("does not follow a redirect (to 127.0.0.1)", async () => {
    hits.length = 0;
    const r = await postOnce(`http://127.0.0.1:${port}/redirect`, "{}", {}, { allowPrivate: true });
    assert.equal(r.ok, false);
    assert.equal(r.status, 302);
    assert.match(r.error!, /redirects are not followed/);
    assert.deepEqual(hits.map((h) => h.url), ["/redirect"], "the Location was never requested");
  });

  test("gives up on a receiver that does not answer within the timeout", async () => {
    const r = await postOnce(`http://127.0.0.1:${port}/silent`, "{}", {}, { allowPrivate: true, timeoutMs: 300 });
    assert.equal(r.ok, false);
    assert.match(r.error!, /No answer within 0\.3 s/);
  });

  test("reads only the start of an answer: an endless 200 is a delivery, not a hang", async () => {
    const r = await postOnce(`http://127.0.0.1:${port}/endless`, "{}", {}, { allowPrivate: true, timeoutMs: 3_000 });
    assert.equal(r.ok, true, r.error ?? "");
    assert.equal(r.status, 200);
  });
});
