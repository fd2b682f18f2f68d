import { eventFromRow, messageFromRow } from "../store/rows";
import { ParleyError } from "../errors";
import type { Projections } from "../domain/replay";
import { publicTask } from "../domain/tasks";
import { publicTurn } from "../domain/turns";
import { bytesToBase64, bytesToHex, hexToBytes } from "../log/bytes";
import { consistencyProof, inclusionProof, memoisedSubtree, type SubtreeHash } from "../log/merkle";
import { BUNDLE_FORMAT, RoomVerifier, type Ed25519Verify, type RoomBundle, type VerifyReport } from "../log/verify";
import { bytesEqual } from "../log/bytes";
import type { Message } from "../domain/message";
import type { RoomRow, StoreReader } from "../store/types";
import { ALL, type Services } from "./context";
import { requireRoom } from "./access";
import { ed25519VerifyAsync } from "./server-key";

const serverKeyRef = (svc: Services) => ({ key_name: svc.key.keyName, pubkey_hex: svc.key.pubkeyHex });

/** The room's projections as the store holds them, read through `reader` (a snapshot). */
export async function readProjections(reader: StoreReader, room: RoomRow, messages: Message[]): Promise<Projections> {
  return {
    room: {
      description: room.description,
      is_public: room.isPublic,
      protocol_mode: room.protocolMode,
      mode: room.mode,
      status: room.status as "open" | "closed",
      message_count: room.messageCount,
      agent_count: room.agentCount,
      size: room.headSize,
    },
    messages,
    ledger: {
      threads: await reader.listThreads(room.uuid),
      revisions: await reader.listRevisions(room.uuid),
      discrepancies: await reader.listDiscrepancies(room.uuid),
      handshakes: await reader.listHandshakes(room.uuid),
    },
    board: {
      tasks: (await reader.listTasks(room.uuid)).map(publicTask),
      agents: await reader.listBoardAgents(room.uuid),
    },
    turns: { room: (await reader.getTurnsRoom(room.uuid)) ?? null, turns: (await reader.listTurns(room.uuid)).map(publicTurn) },
  };
}

/** Reads a room's whole log and projections in one snapshot: no write can land between the reads. */
function readBundle(svc: Services, rawRoomId: string): Promise<{ bundle: RoomBundle }> {
  return svc.store.snapshot(async (reader) => {
    const room = await requireRoom(svc, rawRoomId, reader);
    const rows = await reader.listEvents(room.uuid, 0, ALL);
    const messages = (await reader.listMessages(room.uuid, 0, ALL)).map(messageFromRow);
    return {
      bundle: {
        format: BUNDLE_FORMAT,
        origin: `${svc.originHost}/room/${room.uuid}`,
        room: room.uuid,
        server_key: serverKeyRef(svc),
        events: rows.map(eventFromRow),
        // One checkpoint per committed batch: the events inside a batch carry none.
        checkpoints: rows.map((r) => r.checkpoint).filter((c) => c !== ""),
        projections: await readProjections(reader, room, messages),
      },
    };
  });
}

export async function exportRoom(svc: Services, rawRoomId: string): Promise<RoomBundle> {
  return (await readBundle(svc, rawRoomId)).bundle;
}

/**
 * Ed25519 verification that knows the server's own key. Ed25519 signatures are deterministic
 * (RFC 8032): the checkpoint the server signed is exactly sign(key, body), so signing the body again
 * and comparing — about a third of a verification's cost here — says "valid" exactly when it is the
 * server's signature, which is then valid by construction. Anything else (another key, a signature
 * that differs) is verified as usual, so the answer is always the one verification gives; a room
 * with a checkpoint per event (PostgreSQL) is checked with a third of the CPU.
 */
function ownKeyVerify(svc: Services): Ed25519Verify {
  const own = svc.key.pubkey;
  return (pub, msg, sig) => {
    if (sig.length === 64 && bytesEqual(pub, own)) {
      try {
        if (bytesEqual(svc.key.sign(msg), sig)) return true;
      } catch {
        // not signable: verify it
      }
    }
    return ed25519VerifyAsync(pub, msg, sig);
  };
}

/** Rows per read while verifying: few queries, and a page of rows at a time in memory. */
const VERIFY_PAGE = 1000;

/**
 * POST /verify: the shared verifier over the stored log, with the server's own key, fed a page of
 * rows at a time inside one snapshot (no write lands between the reads): each event with the leaf
 * hash the server stores for it, each batch's checkpoint as its row passes (its Ed25519 check runs
 * on the thread pool while the next page is hashed), then the projections, messages a page at a
 * time. The rows are never all in memory, nor the bundle they would make.
 */
export async function verifyRoom(svc: Services, rawRoomId: string, opts: { checkpoint?: string } = {}): Promise<VerifyReport> {
  return svc.store.snapshot(async (reader) => {
    const room = await requireRoom(svc, rawRoomId, reader);
    const key = serverKeyRef(svc);
    const v = new RoomVerifier({ origin: `${svc.originHost}/room/${room.uuid}`, room: room.uuid, server_key: key }, { verify: ownKeyVerify(svc), trustedKey: key, checkpoint: opts.checkpoint });
    for (let after = 0; ; ) {
      const rows = await reader.listEvents(room.uuid, after, VERIFY_PAGE);
      for (const r of rows) {
        v.event(eventFromRow(r), r.leafHash);
        // One checkpoint per committed batch: the events inside a batch carry none.
        if (r.checkpoint !== "") v.checkpoint(r.checkpoint);
      }
      if (rows.length < VERIFY_PAGE) break;
      after = rows.at(-1)!.seq;
    }
    v.endEvents();
    const { messages: _none, ...served } = await readProjections(reader, room, []);
    v.servedProjections(served);
    for (let after = 0; ; ) {
      const rows = await reader.listMessages(room.uuid, after, VERIFY_PAGE);
      for (const r of rows) v.servedMessage(messageFromRow(r));
      if (rows.length < VERIFY_PAGE) break;
      after = rows.at(-1)!.seq;
    }
    return v.finish();
  });
}

export async function latestCheckpoint(svc: Services, rawRoomId: string): Promise<string> {
  return (await requireRoom(svc, rawRoomId)).checkpoint;
}

function treeSize(room: RoomRow, name: string, value: number | undefined): number {
  const size = value ?? room.headSize;
  if (size < 1 || size > room.headSize) {
    throw new ParleyError("validation_error", `${name}: must be between 1 and the current size ${room.headSize}.`);
  }
  return size;
}

interface ProofTree {
  leaves: Uint8Array[];
  subtree: SubtreeHash;
}
const proofTrees = (svc: Services) => svc.caches.of<ProofTree>("proofTrees", 64);

/**
 * A room's leaves and memoised perfect-subtree roots, kept between proof requests and extended
 * with the leaves appended since: a proof costs O(log n) hashes, not a rehash of the room.
 */
async function proofTree(svc: Services, room: RoomRow): Promise<ProofTree> {
  // Leaves are append-only, so a tree stays good as the room grows; it is keyed by the room's
  // creation so a room deleted and made again (never the same id in practice) starts afresh.
  const cache = proofTrees(svc);
  let tree = cache.peek(room.uuid, room.createdAt);
  if (!tree) {
    const leaves: Uint8Array[] = [];
    tree = cache.set(room.uuid, room.createdAt, { leaves, subtree: memoisedSubtree(leaves, new Map()) });
  }
  if (tree.leaves.length < room.headSize) {
    const from = tree.leaves.length;
    const hashes = await svc.store.leafHashes(room.uuid, room.headSize, from);
    // Another request may have extended it meanwhile: append only what is still missing.
    for (const hex of hashes.slice(tree.leaves.length - from)) tree.leaves.push(hexToBytes(hex));
  }
  return tree;
}

/** RFC 9162 inclusion proof of event `seq` in the tree of `size` events (default: the current one). */
export async function inclusionProofFor(svc: Services, rawRoomId: string, seq: number, size?: number) {
  const room = await requireRoom(svc, rawRoomId);
  const n = treeSize(room, "size", size);
  if (seq < 1 || seq > n) throw new ParleyError("validation_error", `seq: must be between 1 and the tree size ${n}.`);
  const { leaves, subtree } = await proofTree(svc, room);
  return {
    seq,
    size: n,
    leaf_index: seq - 1,
    leaf_hash: bytesToHex(leaves[seq - 1]!),
    proof: inclusionProof(leaves, seq - 1, n, subtree).map(bytesToBase64),
    root: bytesToBase64(subtree(0, n)),
    // Signed sizes are the ends of committed batches (every receipt names one); inside a batch, none.
    checkpoint: (await svc.store.checkpointAt(room.uuid, n)) || null,
  };
}

/** RFC 9162 consistency proof from the tree of `from` events to the tree of `to` events. */
export async function consistencyProofFor(svc: Services, rawRoomId: string, from: number, to?: number) {
  const room = await requireRoom(svc, rawRoomId);
  const n = treeSize(room, "to", to);
  if (from < 1 || from > n) throw new ParleyError("validation_error", `from: must be between 1 and to (${n}).`);
  const { leaves, subtree } = await proofTree(svc, room);
  return {
    from,
    to: n,
    proof: consistencyProof(leaves, from, n, subtree).map(bytesToBase64),
    from_root: bytesToBase64(subtree(0, from)),
    to_root: bytesToBase64(subtree(0, n)),
  };
}
