import { ParleyError } from "../errors";
import type { Projections } from "../domain/replay";
import { publicTask } from "../domain/tasks";
import { publicTurn } from "../domain/turns";
import { bytesToBase64, bytesToHex, hexToBytes } from "../log/bytes";
import { consistencyProof, inclusionProof, memoisedSubtree, type SubtreeHash } from "../log/merkle";
import { BUNDLE_FORMAT, verifyBundle, type RoomBundle, type VerifyReport } from "../log/verify";
import type { RoomRow } from "../store/types";
import { ALL, type Services } from "./context";
import { eventFromRow } from "./events";
import { messageFromRow } from "./messages";
import { requireRoom } from "./rooms";
import { ed25519VerifyAsync } from "./server-key";


const serverKeyRef = (svc: Services) => ({ key_name: svc.key.keyName, pubkey_hex: svc.key.pubkeyHex });

/** Reads a room's whole log and projections in one synchronous pass: no write can interleave. */
function readBundle(svc: Services, room: RoomRow): { bundle: RoomBundle; leafHashes: string[] } {
  const rows = svc.store.listEvents(room.uuid, 0, ALL);
  const projections: Projections = {
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
    messages: svc.store.listMessages(room.uuid, 0, ALL).map(messageFromRow),
    ledger: {
      threads: svc.store.listThreads(room.uuid),
      revisions: svc.store.listRevisions(room.uuid),
      discrepancies: svc.store.listDiscrepancies(room.uuid),
      handshakes: svc.store.listHandshakes(room.uuid),
    },
    board: {
      tasks: svc.store.listTasks(room.uuid).map(publicTask),
      agents: svc.store.listBoardAgents(room.uuid),
    },
    turns: { room: svc.store.getTurnsRoom(room.uuid) ?? null, turns: svc.store.listTurns(room.uuid).map(publicTurn) },
  };
  return {
    bundle: {
      format: BUNDLE_FORMAT,
      origin: `${svc.originHost}/room/${room.uuid}`,
      room: room.uuid,
      server_key: serverKeyRef(svc),
      events: rows.map(eventFromRow),
      checkpoints: rows.map((r) => r.checkpoint),
      projections,
    },
    leafHashes: rows.map((r) => r.leafHash),
  };
}

export function exportRoom(svc: Services, rawRoomId: string): RoomBundle {
  return readBundle(svc, requireRoom(svc, rawRoomId)).bundle;
}

/** POST /verify: the shared verifier over the stored log, with the server's own key. */
export function verifyRoom(svc: Services, rawRoomId: string, opts: { checkpoint?: string } = {}): Promise<VerifyReport> {
  const { bundle, leafHashes } = readBundle(svc, requireRoom(svc, rawRoomId));
  return verifyBundle(bundle, { verify: ed25519VerifyAsync, trustedKey: serverKeyRef(svc), storedLeafHashes: leafHashes, checkpoint: opts.checkpoint });
}

export function latestCheckpoint(svc: Services, rawRoomId: string): string {
  return requireRoom(svc, rawRoomId).checkpoint;
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
const proofTrees = new WeakMap<Services, Map<string, ProofTree>>();
const PROOF_TREE_ROOMS = 64;

/**
 * A room's leaves and memoised perfect-subtree roots, kept between proof requests and extended
 * with the leaves appended since: a proof costs O(log n) hashes, not a rehash of the room.
 */
function proofTree(svc: Services, room: RoomRow): ProofTree {
  let rooms = proofTrees.get(svc);
  if (!rooms) proofTrees.set(svc, (rooms = new Map()));
  let tree = rooms.get(room.uuid);
  if (!tree) {
    if (rooms.size >= PROOF_TREE_ROOMS) rooms.delete(rooms.keys().next().value!);
    const leaves: Uint8Array[] = [];
    tree = { leaves, subtree: memoisedSubtree(leaves, new Map()) };
    rooms.set(room.uuid, tree);
  }
  if (tree.leaves.length < room.headSize) {
    for (const hex of svc.store.leafHashes(room.uuid, room.headSize, tree.leaves.length)) tree.leaves.push(hexToBytes(hex));
  }
  return tree;
}

/** RFC 9162 inclusion proof of event `seq` in the tree of `size` events (default: the current one). */
export function inclusionProofFor(svc: Services, rawRoomId: string, seq: number, size?: number) {
  const room = requireRoom(svc, rawRoomId);
  const n = treeSize(room, "size", size);
  if (seq < 1 || seq > n) throw new ParleyError("validation_error", `seq: must be between 1 and the tree size ${n}.`);
  const { leaves, subtree } = proofTree(svc, room);
  return {
    seq,
    size: n,
    leaf_index: seq - 1,
    leaf_hash: bytesToHex(leaves[seq - 1]!),
    proof: inclusionProof(leaves, seq - 1, n, subtree).map(bytesToBase64),
    root: bytesToBase64(subtree(0, n)),
    checkpoint: svc.store.checkpointAt(room.uuid, n)!,
  };
}

/** RFC 9162 consistency proof from the tree of `from` events to the tree of `to` events. */
export function consistencyProofFor(svc: Services, rawRoomId: string, from: number, to?: number) {
  const room = requireRoom(svc, rawRoomId);
  const n = treeSize(room, "to", to);
  if (from < 1 || from > n) throw new ParleyError("validation_error", `from: must be between 1 and to (${n}).`);
  const { leaves, subtree } = proofTree(svc, room);
  return {
    from,
    to: n,
    proof: consistencyProof(leaves, from, n, subtree).map(bytesToBase64),
    from_root: bytesToBase64(subtree(0, from)),
    to_root: bytesToBase64(subtree(0, n)),
  };
}
