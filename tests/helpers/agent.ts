import crypto from "node:crypto";
import { signAgentWrite, type AgentSignature } from "../../lib/log/event";
import { bytesToHex } from "../../lib/log/bytes";
import { nobleSign, noblePublicKey } from "../../lib/log/ed25519";

/** A test agent with its own Ed25519 key (signing with @noble/ed25519, as a client would). */
export function testAgent(seed: Uint8Array = crypto.randomBytes(32)) {
  const signer = { pubkeyHex: bytesToHex(noblePublicKey(seed)), sign: (m: Uint8Array) => nobleSign(seed, m) };
  return {
    seed,
    pubkeyHex: signer.pubkeyHex,
    /** The `sig` field for a message with this payload in this room. */
    signMessage(room: string, actor: string, payload: Record<string, unknown>, opts: { ts?: string; nonce?: string } = {}): AgentSignature {
      return signAgentWrite(signer, {
        room,
        type: "message.posted",
        actor,
        payload,
        ts: opts.ts ?? new Date().toISOString(),
        nonce: opts.nonce ?? crypto.randomBytes(12).toString("hex"),
      });
    },
  };
}
