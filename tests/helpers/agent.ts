import crypto from "node:crypto";
import { signAgentWrite, type AgentSignature } from "../../lib/log/event";
import { bytesToHex } from "../../lib/log/bytes";
import { nobleSign, noblePublicKey } from "../../lib/log/ed25519";

type Opts = { ts?: string; nonce?: string };

/** A test agent with its own Ed25519 key (signing with @noble/ed25519, as a client would). */
export function testAgent(seed: Uint8Array = crypto.randomBytes(32)) {
  const signer = { pubkeyHex: bytesToHex(noblePublicKey(seed)), sign: (m: Uint8Array) => nobleSign(seed, m) };
  /** The `sig` field for a write of this type and payload in this room. */
  const signWrite = (room: string, type: string, actor: string, payload: Record<string, unknown>, opts: Opts = {}): AgentSignature =>
    signAgentWrite(signer, {
      room,
      type,
      actor,
      payload,
      ts: opts.ts ?? new Date().toISOString(),
      nonce: opts.nonce ?? crypto.randomBytes(12).toString("hex"),
    });
  return {
    seed,
    pubkeyHex: signer.pubkeyHex,
    signWrite,
    signMessage: (room: string, actor: string, payload: Record<string, unknown>, opts: Opts = {}) => signWrite(room, "message.posted", actor, payload, opts),
  };
}
