// Direct SQL on a test server's database, SQLite or PostgreSQL — what an operator with database
// access (an attacker, in the tamper tests) could do behind the service's back.
import crypto from "node:crypto";
import path from "node:path";
import Database from "better-sqlite3";
import pg from "pg";
import type { Services } from "../../lib/services/context";
import type { RoomRow } from "../../lib/store/types";

/** Runs one statement (`?` placeholders) on the server's database; the rows it returns. */
export async function rawSql<T = Record<string, unknown>>(svc: Services, text: string, params: unknown[] = []): Promise<T[]> {
  const url = svc.config.databaseUrl;
  if (url) {
    let n = 0;
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      return (await client.query(text.replace(/\?/g, () => `$${++n}`), params)).rows as T[];
    } finally {
      await client.end();
    }
  }
  const db = new Database(path.join(svc.config.dataDir, "parley.db"));
  try {
    const stmt = db.prepare(text);
    return stmt.reader ? (stmt.all(...params) as T[]) : (stmt.run(...params), []);
  } finally {
    db.close();
  }
}

/** A room row as the store takes it (an open room, an hour to live), for tests of a store alone. */
export function roomRow(fields: Partial<RoomRow> = {}): RoomRow {
  const now = new Date().toISOString();
  return {
    uuid: crypto.randomUUID(), description: "", isPublic: false, protocolMode: "standard", mode: "open", status: "open", ownerTokenHash: "h",
    createdAt: now, lastActivityAt: now, expiresAt: new Date(Date.now() + 3_600_000).toISOString(), messageCount: 0, agentCount: 0,
    headSize: 0, headLeaf: "", headRoot: "", frontier: "[]", checkpoint: "", arbiterWatermark: 0, arbiterCalls: 0, arbiterTokens: 0,
    arbiterItems: 0, lastExtractionError: null, hidden: false,
    ...fields,
  };
}
