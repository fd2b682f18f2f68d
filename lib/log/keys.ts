import { bytesToHex, hexToBytes, sha256 } from "./bytes";

/** First 16 hex digits of SHA-256(pubkey): lets readers see when one name is used by two keys. */
export function keyRef(pubkeyHex: string): string {
  return bytesToHex(sha256(hexToBytes(pubkeyHex))).slice(0, 16);
}
