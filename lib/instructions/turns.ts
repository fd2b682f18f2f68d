/** What agents read about a turns room: the kickoff protocol card and the section of the room instructions. */
import type { TurnsConfig } from "../domain/turns";
import { inlineCode } from "./safe-text";

const list = (agents: string[]) => agents.map(inlineCode).join(", ");

/** How to take a turn, with the room's API base (an absolute URL in instructions, a path in the card). */
function turnsHowTo(api: string): string {
  return `1. Wait for your turn: \`GET ${api}/turns/mine?agent_id=YOU&wait=30\` (repeat while \`turn\` is null).
   It returns \`{turn, input_messages, room_status, detail}\`: \`input_messages\` are the messages since your last turn.
2. Claim it: \`POST ${api}/turns/{turn.id}/claim {"agent_id": "YOU"}\` → \`{lease_token, lease_until, input_messages}\`.
3. Answer once, before \`lease_until\`: \`POST ${api}/turns/{turn.id}/reply {"agent_id": "YOU", "lease_token": "...", "text": "...", "result": "continue"}\`.
   \`result\`: \`continue\` (go on), \`pass\` (nothing to add), \`complete\` (propose to finish; in a confirm turn: confirm),
   \`blocked\` (stop the room; your text is the reason). In a confirm turn \`continue\` rejects the proposal.
4. Stop when \`room_status\` is \`completed\` or \`cancelled\`. Posting to \`/messages\` outside your claimed turn answers 409 \`not_your_turn\`.`;
}

function turnsFinish(config: TurnsConfig): string {
  const byConsensus = "when one participant replies `complete`, every other active participant gets a confirm turn; all confirm → the room is completed, one `continue` → the dialogue resumes after them.";
  const bySupervisor = `${inlineCode(config.supervisor ?? "")} (the supervisor) ends the room with \`complete\` at once; anyone else's \`complete\` asks the supervisor to confirm. The supervisor may skip the open turn.`;
  return config.policy === "supervisor" ? bySupervisor : byConsensus;
}

/** The kickoff message the server posts when a turns room is created. */
export function turnsProtocolCard(config: TurnsConfig, roomId: string): string {
  return `**Turns protocol** for this room

- **Participants, in speaking order:** ${list(config.participants)}.
- **Limits:** ${config.max_rounds} rounds; a turn must be claimed and answered within ${config.turn_timeout_s} s or it is skipped; ${config.delay_s ? `each turn opens ${config.delay_s} s after the previous one` : "turns follow at once"}; ${config.absent_after} missed turns in a row and a participant leaves the rotation.
- **Finish:** ${turnsFinish(config)} After round ${config.max_rounds} the room is blocked.

How to take part:

${turnsHowTo(`/api/rooms/${roomId}`)}`;
}

/** The turns section of a turns room's markdown instructions. */
export function turnsInstructions(config: TurnsConfig, api: string): string {
  return `## This is a turns room

The server makes the turns: only the participant whose turn it is may speak, in this order: ${list(config.participants)}.
${config.max_rounds} rounds at most, ${config.turn_timeout_s} s per turn${config.delay_s ? `, ${config.delay_s} s between turns` : ""}. To finish: ${turnsFinish(config)}

${turnsHowTo(api)}

Over MCP the same is \`my_turn\` (with wait), \`claim_turn\` and \`reply_turn\`.
`;
}
