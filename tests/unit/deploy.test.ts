import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parse } from "yaml";
import { CLUSTER_CONF, SINGLE_CONF, findNginx, mainConfig, startNginx } from "../helpers/nginx";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const NGINX = findNginx();
const NO_NGINX = "nginx is not installed (apt-get install nginx; .ci/run installs it)";

function hasOpenssl(): boolean {
  return spawnSync("openssl", ["version"]).status === 0;
}

/** A self-signed certificate for nginx -t, which reads the files a site names. */
function selfSignedCert(dir: string): { cert: string; key: string } {
  const cert = path.join(dir, "cert.pem");
  const key = path.join(dir, "key.pem");
  execFileSync("openssl", ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=parley.example", "-keyout", key, "-out", cert], { stdio: "ignore" });
  return { cert, key };
}

/** nginx -t on a site inside a main config whose every path is in dir; its exit status and output. */
function nginxTest(dir: string, site: string): { status: number | null; output: string } {
  const conf = path.join(dir, "nginx.conf");
  fs.writeFileSync(conf, mainConfig(dir, site));
  const r = spawnSync(NGINX!, ["-t", "-p", `${dir}/`, "-e", path.join(dir, "error.log"), "-c", conf], { encoding: "utf8" });
  return { status: r.status, output: `${r.stdout}${r.stderr}`.trim() };
}

function nginxVersion(): string {
  return spawnSync(NGINX!, ["-v"], { encoding: "utf8" }).stderr.trim();
}

/** The "host:port" servers of nginx/cluster.conf's upstream. */
function upstreamServers(conf: string): string[] {
  const block = /upstream\s+parley_cluster\s*\{([\s\S]*?)\n\}/.exec(conf);
  assert.ok(block, "nginx/cluster.conf defines upstream parley_cluster");
  return [...block[1].matchAll(/^\s*server\s+(\S+?)[\s;]/gm)].map((m) => m[1]);
}

describe("nginx -t accepts the site configs on the installed nginx", { skip: NGINX ? false : NO_NGINX }, () => {
  let dir: string;
  before(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "parley-nginx-t-"));
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  test("nginx/parley.conf (one instance, TLS), with a self-signed certificate for the Let's Encrypt paths", { skip: hasOpenssl() ? false : "openssl is not installed" }, (t) => {
    const { cert, key } = selfSignedCert(dir);
    const source = fs.readFileSync(SINGLE_CONF, "utf8");
    const site = source.replace(/^(\s*ssl_certificate)\s+[^;]+;/m, `$1 ${cert};`).replace(/^(\s*ssl_certificate_key)\s+[^;]+;/m, `$1 ${key};`);
    assert.notEqual(site, source, "parley.conf names a certificate and a key");
    const r = nginxTest(dir, site);
    t.diagnostic(`${nginxVersion()}: ${r.output}`);
    assert.equal(r.status, 0, r.output);
    assert.match(r.output, /test is successful/);
  });

  test("nginx/cluster.conf (several instances), with the compose host names pointed at loopback", (t) => {
    // nginx -t resolves upstream names; parley1… exist only inside the compose network.
    const source = fs.readFileSync(CLUSTER_CONF, "utf8");
    const site = source.replace(/^(\s*server\s+)parley(\d+):3000/gm, (_m, lead: string, n: string) => `${lead}127.0.0.1:${40000 + Number(n)}`);
    assert.notEqual(site, source, "cluster.conf lists parley1… as upstream servers");
    const r = nginxTest(dir, site);
    t.diagnostic(`${nginxVersion()}: ${r.output}`);
    assert.equal(r.status, 0, r.output);
    assert.match(r.output, /test is successful/);
  });
});

/** Compose's ${VAR:-default} as its default, ${VAR:?message} as <VAR> (required), ${VAR} as empty: nothing is set here. */
function interpolate(value: unknown): string {
  return String(value).replace(/\$\{([A-Z0-9_]+)(?::?([-?])([^}]*))?\}/g, (_m, name: string, op?: string, arg?: string) =>
    op === "?" ? `<${name}>` : (arg ?? ""),
  );
}

/** A service's environment as a map, whichever of compose's two forms it uses. */
function environment(service: any): Record<string, string> {
  const env = service.environment ?? {};
  if (Array.isArray(env)) return Object.fromEntries(env.map((line: string) => [line.split("=")[0], interpolate(line.slice(line.indexOf("=") + 1))]));
  return Object.fromEntries(Object.entries(env).map(([k, v]) => [k, interpolate(v ?? "")]));
}

test("docker-compose.yml: postgres with a volume and a healthcheck, three parley instances on it with one key, nginx balancing all three", () => {
  const compose = parse(fs.readFileSync(path.join(ROOT, "docker-compose.yml"), "utf8"), { merge: true });
  const services: Record<string, any> = compose.services;
  assert.ok(services, "docker-compose.yml has services");

  const pg = services.postgres;
  assert.match(pg.image, /^postgres:\d+/);
  const pgEnv = environment(pg);
  const pgVolume = (pg.volumes as string[]).find((v) => v.split(":")[1] === "/var/lib/postgresql/data");
  assert.ok(pgVolume, "the database lives in a volume");
  assert.ok(pgVolume.split(":")[0] in (compose.volumes ?? {}), "a named volume, declared at the top level");
  assert.ok(pg.healthcheck?.test, "postgres has a healthcheck");

  const parley = Object.keys(services).filter((name) => services[name].build !== undefined);
  assert.equal(parley.length, 3, `three instances built from the Dockerfile, got ${parley.join(", ")}`);
  const keys = new Set<string>();
  for (const name of parley) {
    const s = services[name];
    const env = environment(s);
    const db = new URL(env.PARLEY_DATABASE_URL);
    assert.equal(db.protocol, "postgres:", `${name}: PARLEY_DATABASE_URL is a postgres:// URL`);
    assert.equal(db.hostname, "postgres", `${name}: on the postgres service`);
    assert.equal(decodeURIComponent(db.username), pgEnv.POSTGRES_USER, `${name}: as the user postgres creates`);
    assert.equal(decodeURIComponent(db.password), pgEnv.POSTGRES_PASSWORD, `${name}: with its password`);
    assert.equal(db.pathname, `/${pgEnv.POSTGRES_DB}`, `${name}: on the database postgres creates`);
    assert.equal(env.PARLEY_TRUST_PROXY, "1", `${name}: trusts the one nginx hop`);
    assert.match(env.PARLEY_PUBLIC_URL, /^https?:\/\/[^/]+$/, `${name}: has a public URL`);
    assert.equal(s.depends_on?.postgres?.condition, "service_healthy", `${name}: starts once postgres is healthy`);
    assert.equal(s.ports, undefined, `${name}: publishes no port (only nginx does, so X-Forwarded-For cannot be forged)`);
    if (env.PARLEY_KEY) keys.add(`env:${env.PARLEY_KEY}`);
    else {
      const secret = /^\/run\/secrets\/([^/]+)$/.exec(env.PARLEY_KEY_FILE ?? "");
      assert.ok(secret, `${name}: the server key comes from PARLEY_KEY or a mounted secret file`);
      assert.ok((s.secrets as string[]).includes(secret[1]), `${name}: mounts the secret ${secret[1]}`);
      assert.ok(compose.secrets?.[secret[1]]?.file, `secret ${secret[1]} is a file`);
      keys.add(`file:${compose.secrets[secret[1]].file}`);
    }
  }
  assert.equal(keys.size, 1, "every instance signs with the same key");

  const nginx = services.nginx;
  assert.match(nginx.image, /^nginx:/);
  assert.ok((nginx.ports as string[]).some((p) => String(p).endsWith(":8080")), "nginx publishes port 8080");
  const mount = (nginx.volumes as string[]).find((v) => v.startsWith("./nginx/cluster.conf:"));
  assert.ok(mount, "nginx runs nginx/cluster.conf");
  assert.match(mount, /^\.\/nginx\/cluster\.conf:\/etc\/nginx\/conf\.d\/[^:]+\.conf(:ro)?$/);
  assert.deepEqual(upstreamServers(fs.readFileSync(CLUSTER_CONF, "utf8")).sort(), parley.map((name) => `${name}:3000`).sort(), "the upstream lists every instance");
});

// gzip for event streams at the http level (an operator's nginx.conf may say so): nginx then holds
// a stream back unless its route turns buffering or gzip off, which cluster.conf's stream route does.
const OPERATOR_GZIP = "gzip on; gzip_types text/event-stream; gzip_min_length 1;";

describe("startNginx: nginx/cluster.conf in front of two upstreams", { skip: NGINX ? false : NO_NGINX }, () => {
  const upstreams: http.Server[] = [];
  const hits = new Map<string, number>();
  let posts = 0;
  let nginx: { url: string; stop(): Promise<void> } | null = null;
  // The stream the upstream is holding open: whether it has ended, and how to let it finish.
  let openStream: ((s: { ended(): boolean; finish(): void }) => void) | undefined;

  function upstream(name: string): http.Server {
    return http.createServer((req, res) => {
      hits.set(name, (hits.get(name) ?? 0) + 1);
      if (req.method === "POST") {
        req.resume();
        req.on("end", () => {
          posts++;
          res.writeHead(201, { "content-type": "application/json" }).end(`{"by":"${name}"}`);
        });
        return;
      }
      if (req.url === "/api/rooms/r1/events") {
        // No X-Accel-Buffering header (the app sends one): the config alone must keep this unbuffered.
        res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-store" });
        res.write("data: first\n\n");
        let ended = false;
        const finish = () => {
          if (ended) return;
          ended = true;
          clearTimeout(fallback);
          res.end("data: second\n\n");
        };
        // Only so that a buffering proxy makes the test fail instead of hang.
        const fallback = setTimeout(finish, 10_000);
        openStream?.({ ended: () => ended, finish });
        return;
      }
      res.writeHead(200, { "content-type": "text/plain" }).end(name);
    });
  }

  before(async () => {
    const ports: number[] = [];
    for (const name of ["a", "b"]) {
      const server = upstream(name);
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
      upstreams.push(server);
      ports.push((server.address() as { port: number }).port);
    }
    nginx = await startNginx(ports, { httpConfig: OPERATOR_GZIP });
    assert.ok(nginx, "nginx is installed, so startNginx starts it");
  });

  after(async () => {
    await nginx?.stop();
    for (const s of upstreams) {
      s.closeAllConnections();
      await new Promise<void>((resolve) => s.close(() => resolve()));
    }
  });

  test("requests are spread over both upstreams", async () => {
    const answeredBy = new Set<string>();
    for (let i = 0; i < 8; i++) {
      const res = await fetch(`${nginx!.url}/whoami`);
      assert.equal(res.status, 200);
      answeredBy.add(await res.text());
    }
    assert.deepEqual([...answeredBy].sort(), ["a", "b"]);
  });

  test("an event stream arrives unbuffered, gzip on or not: its first event reaches the client before the upstream ends the response", async () => {
    const opened = new Promise<{ ended(): boolean; finish(): void }>((resolve) => (openStream = resolve));
    const res = await fetch(`${nginx!.url}/api/rooms/r1/events`, { headers: { "accept-encoding": "gzip" } });
    assert.equal(res.status, 200);
    assert.match(res.headers.get("content-type") ?? "", /^text\/event-stream/);
    const stream = await opened;
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    const first = await reader.read();
    const endedAtFirstChunk = stream.ended();
    let text = decoder.decode(first.value, { stream: true });
    stream.finish();
    for (let r = await reader.read(); !r.done; r = await reader.read()) text += decoder.decode(r.value, { stream: true });
    assert.equal(endedAtFirstChunk, false, "nginx held the stream back until the upstream ended it");
    assert.match(text, /^data: first\n\n/);
    assert.match(text, /data: second\n\n$/);
  });

  test("a 100 KiB body is refused by nginx with the app's JSON 413; a small one passes", async () => {
    const before = posts;
    const big = await fetch(`${nginx!.url}/api/rooms/r1/messages`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ agent_id: "a", text: "x".repeat(100 * 1024) }),
    });
    assert.equal(big.status, 413);
    assert.match(big.headers.get("content-type") ?? "", /^application\/json/);
    assert.equal((await big.json()).code, "payload_too_large");
    assert.equal(posts, before, "the upstream never saw the large body");

    const small = await fetch(`${nginx!.url}/api/rooms/r1/messages`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ agent_id: "a", text: "x".repeat(1024) }),
    });
    assert.equal(small.status, 201);
    assert.equal(posts, before + 1);
  });
});
