/**
 * Ed25519 verification for the watcher's in-browser verifier: WebCrypto where the browser has it
 * (native, off the main thread), else @noble/ed25519 (plain JS, no WebAssembly, nothing for the CSP
 * to object to). Browser-only: imported by client components.
 */
import { bytesToHex, hexToBytes } from "../lib/log/bytes";
import { isStrictEd25519Input, nobleVerify } from "../lib/log/ed25519";
import type { Ed25519Verify } from "../lib/log/verify";

export type Ed25519Impl = "WebCrypto" | "noble";

// RFC 8032 §7.1, TEST 1: a known-good signature over the empty message.
const PROBE_PUB = "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a";
const PROBE_SIG =
  "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b";

/** WebCrypto wants ArrayBuffer-backed views; ours are (they come from hexToBytes / TextEncoder). */
const buf = (b: Uint8Array) => b as Uint8Array<ArrayBuffer>;

const subtle = (): SubtleCrypto | undefined => (typeof crypto !== "undefined" ? crypto.subtle : undefined);

/** Imported keys, per public key hex: a room has one server key and a few agent keys. */
const keys = new Map<string, Promise<CryptoKey>>();

function importKey(s: SubtleCrypto, pub: Uint8Array): Promise<CryptoKey> {
  const hex = bytesToHex(pub);
  let key = keys.get(hex);
  if (!key) {
    key = s.importKey("raw", buf(pub), { name: "Ed25519" }, false, ["verify"]);
    keys.set(hex, key);
    key.catch(() => keys.delete(hex));
  }
  return key;
}

/** WebCrypto behind the strict input rules: like OpenSSL, it accepts small-order keys and R. */
async function webCryptoVerify(s: SubtleCrypto, pub: Uint8Array, msg: Uint8Array, sig: Uint8Array): Promise<boolean> {
  if (!isStrictEd25519Input(pub, sig)) return false;
  return s.verify("Ed25519", await importKey(s, pub), buf(sig), buf(msg));
}

let detected: Promise<Ed25519Impl> | undefined;

/**
 * Which implementation this browser gets, decided once: WebCrypto only if it imports a key,
 * accepts a known-good signature and rejects the same signature with one bit flipped.
 */
function detectEd25519(): Promise<Ed25519Impl> {
  detected ??= (async (): Promise<Ed25519Impl> => {
    const s = subtle();
    if (!s) return "noble"; // no WebCrypto at all (e.g. a page served over plain http)
    try {
      const pub = hexToBytes(PROBE_PUB);
      const sig = hexToBytes(PROBE_SIG);
      const bad = sig.slice();
      bad[0] ^= 1;
      const empty = new Uint8Array(0);
      const [good, forged] = await Promise.all([webCryptoVerify(s, pub, empty, sig), webCryptoVerify(s, pub, empty, bad)]);
      return good === true && forged === false ? "WebCrypto" : "noble";
    } catch {
      return "noble"; // Ed25519 not supported by this browser's WebCrypto
    }
  })();
  return detected;
}

/**
 * noble in slices: it is synchronous and takes a few ms per signature (a room signs a checkpoint per
 * event), so the checks are queued and run ~12 ms at a time, yielding to the page in between
 * (through a MessageChannel: unlike timers, it is not throttled in a background tab).
 */
function slicedNoble(): Ed25519Verify {
  const queue: (() => void)[] = [];
  let next = 0;
  let scheduled = false;
  const channel = new MessageChannel();
  channel.port1.onmessage = () => {
    const until = performance.now() + 12;
    while (next < queue.length && performance.now() < until) queue[next++]!();
    if (next < queue.length) channel.port2.postMessage(null);
    else {
      queue.length = next = 0;
      scheduled = false;
    }
  };
  return (pub, msg, sig) =>
    new Promise<boolean>((resolve) => {
      queue.push(() => resolve(nobleVerify(pub, msg, sig))); // nobleVerify runs the strict input check first
      if (!scheduled) {
        scheduled = true;
        channel.port2.postMessage(null);
      }
    });
}

let noble: Ed25519Verify | undefined;

/**
 * The verify function to hand to verifyBundle, and which implementation it uses. Both paths refuse
 * small-order and non-canonical keys and signatures first (isStrictEd25519Input), like the server.
 */
export async function browserEd25519(): Promise<{ impl: Ed25519Impl; verify: Ed25519Verify }> {
  const impl = await detectEd25519();
  const s = subtle();
  if (impl === "noble" || !s) return { impl: "noble", verify: (noble ??= typeof MessageChannel === "function" ? slicedNoble() : nobleVerify) };
  return {
    impl,
    verify: async (pub, msg, sig) => {
      try {
        return await webCryptoVerify(s, pub, msg, sig);
      } catch {
        // WebCrypto refused this input (e.g. a key it cannot import): noble decides instead.
        return nobleVerify(pub, msg, sig);
      }
    },
  };
}
