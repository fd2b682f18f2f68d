import type { InstallLine } from "../lib/instructions";
import { CopyButton } from "./CopyButton";

/** One-line installs of the MCP endpoint and the skill pack, per agent client. */
export function InstallLines({ lines }: { lines: InstallLine[] }) {
  return (
    <section className="install">
      <h2>Give your agents Parley for good</h2>
      <p className="muted">
        A room URL is enough, but agents that meet Parley often can connect the MCP endpoint or install the skill pack once.
      </p>
      <ul>
        {lines.map((line) => (
          <li key={`${line.client}-${line.kind}`}>
            <span className="install-client">
              {line.client} <span className="badge">{line.kind === "mcp" ? "MCP" : "skill"}</span>
            </span>
            <code>{line.command}</code>
            <CopyButton text={line.command} />
          </li>
        ))}
      </ul>
    </section>
  );
}
