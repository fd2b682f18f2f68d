import { z } from "zod";
import { BUNDLE_FORMAT } from "../../lib/log/verify";
import type { Services } from "../../lib/services/context";
import { exportStream } from "../../lib/services/export-stream";
import { holdExport } from "../../lib/services/rate-limit";
import { consistencyProofFor, inclusionProofFor, latestCheckpoint, verifyRoom } from "../../lib/services/verify";
import { consistencyProof, consistencyQuery, inclusionProof, inclusionQuery, verifyBody, verifyReport } from "../../lib/schemas/integrity";
import { doc, holdUntilClosed, jsonBody, queryOf, type App } from "../http";

export function integrityRoutes(app: App, svc: Services): void {
  doc({ method: "post", path: "/api/rooms/:id/verify", tag: "integrity", summary: "Verify the room's history (optionally against a checkpoint you kept); always 200", body: verifyBody, response: verifyReport });
  app.post("/api/rooms/:id/verify", async (c) => {
    const body = await jsonBody(c, verifyBody);
    // The whole room in memory while it is checked: as many at once as exports.
    const release = holdExport(svc);
    try {
      return c.json(await verifyRoom(svc, c.req.param("id"), { checkpoint: body.checkpoint }));
    } finally {
      release();
    }
  });

  doc({ method: "get", path: "/api/rooms/:id/checkpoint", tag: "integrity", summary: "The latest signed checkpoint (C2SP signed note)", produces: "text/plain" });
  app.get("/api/rooms/:id/checkpoint", async (c) => c.body(await latestCheckpoint(svc, c.req.param("id")), 200, { "Content-Type": "text/plain; charset=utf-8" }));

  doc({ method: "get", path: "/api/rooms/:id/proof/inclusion", tag: "integrity", summary: "RFC 9162 inclusion proof of event seq in the tree of size events", query: inclusionQuery, response: inclusionProof });
  app.get("/api/rooms/:id/proof/inclusion", async (c) => {
    const q = queryOf(c, inclusionQuery);
    return c.json(await inclusionProofFor(svc, c.req.param("id"), q.seq, q.size));
  });

  doc({ method: "get", path: "/api/rooms/:id/proof/consistency", tag: "integrity", summary: "RFC 9162 consistency proof between two tree sizes", query: consistencyQuery, response: consistencyProof });
  app.get("/api/rooms/:id/proof/consistency", async (c) => {
    const q = queryOf(c, consistencyQuery);
    return c.json(await consistencyProofFor(svc, c.req.param("id"), q.from, q.to));
  });

  doc({ method: "get", path: "/api/rooms/:id/export", tag: "integrity", summary: "The room bundle: events, checkpoints, projections; input of the offline verifier", response: z.object({ format: z.literal(BUNDLE_FORMAT) }).passthrough() });
  // Streamed a page at a time (lib/services/export-stream.ts), and only so many at once: a slot is
  // held until the response has closed, however it ends.
  app.get("/api/rooms/:id/export", (c) =>
    holdUntilClosed(c, holdExport(svc), async () => {
      const { room, body } = await exportStream(svc, c.req.param("id"));
      return c.body(body, 200, { "Content-Type": "application/json", "Content-Disposition": `attachment; filename="parley-room-${room}.json"` });
    }),
  );
}
