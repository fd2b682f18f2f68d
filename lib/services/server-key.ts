import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { bytesToHex } from "../log/bytes";
import { installNodeSha256 } from "../log/node-sha256";
import { keyId } from "../log/checkpoint";
import { isStrictEd25519Input } from "../log/ed25519";
import { signerThread, type SignerCounts, type SignTicket } from "./signer-thread";

// The server hashes with node:crypto; lib/log stays browser-safe and uses noble's by default.
installNodeSha256();

const PKCS8_ED25519_PREFIX = Buffer.from("302e020100300506032b657004220420", "hex");

export interface ServerKey {
  keyName: string;
  pubkey: Uint8Array;
  pubkeyHex: string;
  keyIdHex: string;
  sign(message: Uint8Array): Uint8Array;
  /** The same signature, made meanwhile on a thread of its own (lib/services/signer-thread.ts). */
  signSoon(message: Uint8Array): SignTicket;
  /** The same signature made now, counted with the signer's (a checkpoint not asked for ahead). */
  signNow(message: Uint8Array): Uint8Array;
  signerCounts(): SignerCounts;
  /** Stops the signer's thread (the server's close); signatures are then made on the spot. */
  close(): void;
  verify(pubkey: Uint8Array, message: Uint8Array, signature: Uint8Array): boolean;
}

/** Ed25519 through node:crypto (about 10× faster than pure JS); the seed never leaves this closure. */
export function serverKeyFromSeed(seed: Uint8Array, keyName: string): ServerKey {
  const privateKey = crypto.createPrivateKey({
    key: Buffer.concat([PKCS8_ED25519_PREFIX, seed]),
    format: "der",
    type: "pkcs8",
  });
  const spki = crypto.createPublicKey(privateKey).export({ format: "der", type: "spki" });
  const pubkey = new Uint8Array(spki.subarray(spki.length - 32));
  const signer = signerThread(privateKey);
  return {
    keyName,
    pubkey,
    pubkeyHex: bytesToHex(pubkey),
    keyIdHex: bytesToHex(keyId(keyName, pubkey)),
    sign: (message) => new Uint8Array(crypto.sign(null, message, privateKey)),
    signSoon: signer.signSoon,
    signNow: signer.signHere,
    signerCounts: signer.counts,
    close: signer.close,
    verify: ed25519Verify,
  };
}

const SPKI_ED25519_PREFIX = Buffer.from("302a300506032b6570032100", "hex");
const publicKeys = new Map<string, crypto.KeyObject>();

/** Imported public keys, kept: a room's checkpoints all verify against the same one or few. */
function publicKey(pubkey: Uint8Array): crypto.KeyObject {
  const hex = Buffer.from(pubkey).toString("hex");
  let key = publicKeys.get(hex);
  if (!key) {
    if (publicKeys.size >= 1024) publicKeys.delete(publicKeys.keys().next().value!);
    key = crypto.createPublicKey({ key: Buffer.concat([SPKI_ED25519_PREFIX, pubkey]), format: "der", type: "spki" });
    publicKeys.set(hex, key);
  }
  return key;
}

/**
 * RFC 8032 verification through OpenSSL, behind the strict input check every Parley verifier
 * shares (lib/log/ed25519.ts): OpenSSL alone accepts small-order keys and R, so with the identity as
 * key and (R = identity, S = 0) as signature every message would verify.
 */
export function ed25519Verify(pubkey: Uint8Array, message: Uint8Array, signature: Uint8Array): boolean {
  if (!isStrictEd25519Input(pubkey, signature)) return false;
  try {
    return crypto.verify(null, message, publicKey(pubkey), signature);
  } catch {
    return false;
  }
}

/** The same check (strict input rules first) on libuv's thread pool: a long verification uses every core. */
export function ed25519VerifyAsync(pubkey: Uint8Array, message: Uint8Array, signature: Uint8Array): Promise<boolean> {
  if (!isStrictEd25519Input(pubkey, signature)) return Promise.resolve(false);
  return new Promise((resolve) => {
    try {
      crypto.verify(null, message, publicKey(pubkey), signature, (err, ok) => resolve(!err && ok));
    } catch {
      resolve(false);
    }
  });
}

/** Loads the seed file, creating it (mode 0600) on first start. The seed is never logged or exported. */
export function loadOrCreateServerKey(file: string, keyName: string, seedHex?: string): ServerKey {
  // Several instances must sign with one key: given in the environment, or one file they all read.
  if (seedHex) return serverKeyFromSeed(Buffer.from(seedHex, "hex"), keyName);
  let seed: Uint8Array;
  if (fs.existsSync(file)) {
    const raw = fs.readFileSync(file);
    const text = raw.toString("utf8").trim();
    if (/^[0-9a-f]{64}$/i.test(text)) seed = Buffer.from(text, "hex");
    else if (raw.length === 32) seed = raw;
    else throw new Error(`PARLEY_KEY_FILE ${file} is not an Ed25519 seed (64 hex digits or 32 raw bytes).`);
  } else {
    fs.mkdirSync(path.dirname(file), { recursive: true });
    seed = crypto.randomBytes(32);
    fs.writeFileSync(file, `${Buffer.from(seed).toString("hex")}\n`, { mode: 0o600, flag: "wx" });
  }
  return serverKeyFromSeed(seed, keyName);
}
