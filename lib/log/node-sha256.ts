/**
 * SHA-256 through node:crypto for the Node processes (the server, `parley verify`): NOT for the
 * browser, which keeps lib/log's plain-JS one (bytes.ts). One-shot crypto.hash (Node 20.12+) makes
 * no Hash object per call: on an event's few hundred bytes it is about a third cheaper than
 * createHash().update().digest() and leaves the garbage collector less to finalise; createHash is
 * the fallback on older Nodes. Tree nodes (65 bytes) stay in plain JS (merkle.ts): there a call
 * into node:crypto costs about what the hash does.
 */
import crypto from "node:crypto";
import { useSha256 } from "./bytes";

type OneShot = (algorithm: string, data: Uint8Array, outputEncoding: "buffer") => Buffer;

/** A SHA-256 function over `c` (node:crypto or a stand-in): crypto.hash when it has one, else createHash. */
export function nodeSha256(c: { hash?: unknown; createHash: typeof crypto.createHash }): (data: Uint8Array) => Uint8Array {
  if (typeof c.hash === "function") {
    const hash = c.hash as OneShot;
    return (data) => {
      const b = hash("sha256", data, "buffer");
      // A plain Uint8Array over the digest's own 32 bytes (a Buffer's slice() would not copy).
      return new Uint8Array(b.buffer, b.byteOffset, 32);
    };
  }
  return (data) => new Uint8Array(c.createHash("sha256").update(data).digest());
}

/** Makes lib/log's sha256 node:crypto's (see nodeSha256); call it in a Node entry point's module body. */
export function installNodeSha256(): void {
  useSha256(nodeSha256(crypto));
}
