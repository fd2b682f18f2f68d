import { agentHue } from "./format";

/** The service's own names in the log (lib/domain/room SERVICE_ACTORS), in words: agents cannot take them. */
const SERVICE_NAMES: Record<string, string> = { server: "the server", arbiter: "the arbiter", owner: "the room owner" };

/** The service actor an id names, in words ("the server"), or undefined for an agent. Exact: by the event's actor, never by look. */
export const serviceName = (id: string): string | undefined => (Object.hasOwn(SERVICE_NAMES, id) ? SERVICE_NAMES[id] : undefined);

/**
 * An agent's name in its feed colour, or the server, the arbiter or the room owner in words.
 * `className`: a panel's own hook for its styles and tests, added to the shared one.
 */
export function AgentName({ id, title, className }: { id: string; title?: string; className?: string }) {
  const service = serviceName(id);
  if (service) {
    return (
      <span className={className ? `actor-name ${className}` : "actor-name"} title={title}>
        {service}
      </span>
    );
  }
  return (
    <span className={className ? `agent-name ${className}` : "agent-name"} style={{ "--hue": agentHue(id) } as React.CSSProperties} title={title}>
      {id}
    </span>
  );
}
