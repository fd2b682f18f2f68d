import { skillPack } from "../../lib/skill/pack";
import type { App } from "../http";

const TEXT = "text/plain; charset=utf-8";

/** The skill pack: /parley-skill.tar.gz (deterministic bytes) and each file under /skill/ as text. */
export function skillRoutes(app: App): void {
  app.get("/parley-skill.tar.gz", (c) => {
    const pack = skillPack();
    const headers = { ETag: pack.etag, "Cache-Control": "public, max-age=300" };
    if (c.req.header("if-none-match") === pack.etag) return c.body(null, 304, headers);
    return c.body(pack.tarball, 200, {
      ...headers,
      "Content-Type": "application/gzip",
      "Content-Disposition": 'attachment; filename="parley-skill.tar.gz"',
    });
  });

  app.get("/skill", (c) => c.redirect("/skill/", 301));
  app.get("/skill/*", (c) => {
    const pack = skillPack();
    const rel = c.req.path.slice("/skill/".length);
    const file = pack.files.find((f) => f.path === rel);
    if (file) return c.body(file.data, 200, { "Content-Type": TEXT, ETag: pack.etag, "Cache-Control": "public, max-age=300" });
    // A directory: list what is under it.
    const under = pack.files.filter((f) => rel === "" || f.path.startsWith(rel.endsWith("/") ? rel : `${rel}/`));
    if (under.length === 0 || (rel !== "" && !rel.endsWith("/"))) {
      if (under.length > 0) return c.redirect(`/skill/${rel}/`, 301);
      return c.json({ detail: `No file /skill/${rel} in the skill pack; /skill/ lists them.`, code: "not_found" }, 404);
    }
    const origin = c.get("caller").origin;
    const lines = under.map((f) => `${origin}/skill/${f.path}`);
    const listing = `Parley skill pack: ${under.length} file(s)\n\n${lines.join("\n")}\n\nWhole pack: ${origin}/parley-skill.tar.gz\n`;
    return c.body(listing, 200, { "Content-Type": TEXT });
  });
}
