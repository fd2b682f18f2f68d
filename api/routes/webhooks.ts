import { z } from "zod";
import type { Services } from "../../lib/services/context";
import { registeredWebhook, registerWebhookBody, webhookList, webhookView } from "../../lib/webhooks/schemas";
import { deleteWebhook, getWebhook, listWebhooks, registerWebhook } from "../../lib/webhooks/service";
import { bearer, doc, jsonBody, type App } from "../http";

export function webhookRoutes(app: App, svc: Services): void {
  doc({ method: "post", path: "/api/rooms/:id/webhooks", tag: "webhooks", summary: "Register a webhook (kind alerts: owner token); the secret is shown once", body: registerWebhookBody, response: registeredWebhook, status: 201 });
  app.post("/api/rooms/:id/webhooks", async (c) => {
    const input = await jsonBody(c, registerWebhookBody);
    return c.json(await registerWebhook(svc, c.get("caller"), c.req.param("id"), input, bearer(c)), 201);
  });

  doc({ method: "get", path: "/api/rooms/:id/webhooks", tag: "webhooks", summary: "The room's webhooks; owner token", response: webhookList, owner: true });
  app.get("/api/rooms/:id/webhooks", async (c) => c.json(await listWebhooks(svc, c.req.param("id"), bearer(c))));

  doc({ method: "get", path: "/api/rooms/:id/webhooks/:wid", tag: "webhooks", summary: "A webhook and its recent deliveries; its secret or the owner token", response: webhookView, owner: true });
  app.get("/api/rooms/:id/webhooks/:wid", async (c) => c.json(await getWebhook(svc, c.req.param("id"), c.req.param("wid"), bearer(c))));

  doc({ method: "delete", path: "/api/rooms/:id/webhooks/:wid", tag: "webhooks", summary: "Delete a webhook and its deliveries; its secret or the owner token", response: z.object({ deleted: z.string() }), owner: true });
  app.delete("/api/rooms/:id/webhooks/:wid", async (c) => c.json(await deleteWebhook(svc, c.req.param("id"), c.req.param("wid"), bearer(c))));
}
