import { freePort } from "./net";
import { spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

/** The multi-instance site config that docker-compose.yml runs (nginx/cluster.conf). */
export const CLUSTER_CONF = fileURLToPath(new URL("../../nginx/cluster.conf", import.meta.url));
/** The single-instance TLS site config (nginx/parley.conf). */
export const SINGLE_CONF = fileURLToPath(new URL("../../nginx/parley.conf", import.meta.url));

const READY_PATH = "/__nginx_ready";

/** The nginx binary: $NGINX_PATH, else the PATH, else the usual sbin directories (not on a user's PATH). */
export function findNginx(): string | null {
  const candidates = [
    process.env.NGINX_PATH,
    ...(process.env.PATH ?? "").split(path.delimiter).filter(Boolean).map((dir) => path.join(dir, "nginx")),
    "/usr/sbin/nginx",
    "/usr/local/sbin/nginx",
    "/usr/local/nginx/sbin/nginx",
  ];
  for (const file of candidates) {
    if (!file) continue;
    try {
      fs.accessSync(file, fs.constants.X_OK);
      if (fs.statSync(file).isFile()) return file;
    } catch {
      /* not here */
    }
  }
  return null;
}

/**
 * A main nginx.conf around site configs, every path nginx writes inside dir, so that an unprivileged
 * user can run or test it: no /var/log, /var/lib/nginx or /run.
 */
export function mainConfig(dir: string, sites: string, opts: { daemonOff?: boolean; httpConfig?: string } = {}): string {
  const p = (name: string) => path.join(dir, name);
  // As root nginx would hand its workers to "nobody", who cannot read the temp dir.
  const user = process.getuid?.() === 0 ? "user root;\n" : "";
  return `${user}${opts.daemonOff ? "daemon off;\n" : ""}worker_processes 1;
pid ${p("nginx.pid")};
error_log ${p("error.log")} warn;
events { worker_connections 512; }
http {
    access_log off;
    default_type application/octet-stream;
    client_body_temp_path ${p("client_body")};
    proxy_temp_path ${p("proxy")};
    fastcgi_temp_path ${p("fastcgi")};
    uwsgi_temp_path ${p("uwsgi")};
    scgi_temp_path ${p("scgi")};
${opts.httpConfig ?? ""}
${sites}
}
`;
}

/**
 * nginx/cluster.conf with its upstream servers replaced by loopback ports and its listen by a
 * loopback address, plus a readiness location that never reaches an upstream. Everything else (the
 * balancing, the timeouts, the stream route, the body limit) is the file's own.
 */
export function clusterSite(upstreamPorts: number[], listenPort: number, source = fs.readFileSync(CLUSTER_CONF, "utf8")): string {
  if (upstreamPorts.length === 0) throw new Error("clusterSite: give at least one upstream port");
  const upstream = /(upstream\s+parley_cluster\s*\{)([\s\S]*?)(\n\})/.exec(source);
  if (!upstream) throw new Error(`${CLUSTER_CONF} has no "upstream parley_cluster { … }" block`);
  const serverLine = /^([ \t]*)server\s+\S+(.*);[ \t]*$/m.exec(upstream[2]);
  if (!serverLine) throw new Error(`${CLUSTER_CONF}: the upstream block lists no server`);
  const [, indent, params] = serverLine;
  const servers = upstreamPorts.map((port) => `${indent}server 127.0.0.1:${port}${params};`).join("\n");
  // The first server line becomes the loopback list; the others go.
  let placed = false;
  const body = upstream[2].replace(/^[ \t]*server\s+\S+.*;[ \t]*$\n?/gm, () => {
    if (placed) return "";
    placed = true;
    return `${servers}\n`;
  });
  let site = source.slice(0, upstream.index) + upstream[1] + body + upstream[3] + source.slice(upstream.index + upstream[0].length);

  let listened = false;
  site = site.replace(/^([ \t]*)listen\s+[^;]+;[ \t]*$\n?/gm, (_line, ind: string) => {
    if (listened) return "";
    listened = true;
    return `${ind}listen 127.0.0.1:${listenPort};\n${ind}location = ${READY_PATH} { return 204; }\n`;
  });
  if (!listened) throw new Error(`${CLUSTER_CONF} has no listen directive`);
  return site;
}


// An nginx left running would outlive the test process (daemon off keeps it our child, not our group).
const running = new Set<ChildProcess>();
let exitHook = false;
function track(child: ChildProcess): void {
  running.add(child);
  child.once("exit", () => running.delete(child));
  if (exitHook) return;
  exitHook = true;
  process.once("exit", () => {
    for (const c of running) c.kill("SIGKILL");
  });
}

function readLog(file: string): string {
  try {
    return fs.readFileSync(file, "utf8").trim();
  } catch {
    return "";
  }
}

async function answers(url: string): Promise<boolean> {
  try {
    const res = await fetch(url + READY_PATH);
    await res.arrayBuffer();
    return res.status === 204;
  } catch {
    return false;
  }
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * nginx in front of Parley instances on the given loopback ports, with nginx/cluster.conf's settings,
 * on a free loopback port, as the current user, its files in a temporary directory. Resolves once it
 * answers; null when nginx is not installed. stop() ends it and removes the directory.
 * opts.httpConfig adds directives to the http block around the site (e.g. an operator's gzip).
 */
export async function startNginx(upstreamPorts: number[], opts: { httpConfig?: string } = {}): Promise<{ url: string; stop(): Promise<void> } | null> {
  const bin = findNginx();
  if (!bin) return null;
  const source = fs.readFileSync(CLUSTER_CONF, "utf8");
  let lastError = "";
  // The free port can be taken between the probe and nginx's bind: try another then.
  for (let attempt = 0; attempt < 3; attempt++) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "parley-nginx-"));
    const port = await freePort();
    const conf = path.join(dir, "nginx.conf");
    const errorLog = path.join(dir, "error.log");
    fs.writeFileSync(conf, mainConfig(dir, clusterSite(upstreamPorts, port, source), { daemonOff: true, httpConfig: opts.httpConfig }));
    const child = spawn(bin, ["-p", `${dir}/`, "-e", errorLog, "-c", conf], { stdio: ["ignore", "ignore", "pipe"] });
    track(child);
    let stderr = "";
    child.stderr!.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
    let exited = false;
    const exit = new Promise<void>((resolve) => {
      child.once("exit", () => {
        exited = true;
        resolve();
      });
      child.once("error", (err) => {
        stderr += String(err);
        exited = true;
        resolve();
      });
    });
    const url = `http://127.0.0.1:${port}`;
    const remove = () => fs.rmSync(dir, { recursive: true, force: true });

    const deadline = Date.now() + 15_000;
    let ready = false;
    while (!exited && !ready && Date.now() < deadline) {
      ready = await answers(url);
      if (!ready) await pause(25);
    }
    if (ready && !exited) {
      let stopping: Promise<void> | undefined;
      return {
        url,
        stop: () =>
          (stopping ??= (async () => {
            // SIGTERM is nginx's fast shutdown: open streams are cut rather than waited for.
            if (!exited) child.kill("SIGTERM");
            await exit;
            remove();
          })()),
      };
    }
    if (!exited) child.kill("SIGKILL");
    await exit;
    lastError = [stderr.trim(), readLog(errorLog)].filter(Boolean).join("\n") || "nginx did not answer within 15 s";
    remove();
    if (!/Address already in use/i.test(lastError)) break;
  }
  throw new Error(`nginx did not start:\n${lastError}`);
}
