/** The arbiter's own events (SPEC 5.3): how far it has read, and the messages it gave up on. */
import { z } from "zod";
import { as, defineEvents, seqId, type Feature } from "./event-kind";

const msgId = z.number().int().nonnegative();
export const ARBITER_EVENTS = defineEvents("arbiter", {
  "arbiter.extracted": { payload: z.looseObject({ from_msg_id: msgId, to_msg_id: msgId, applied: z.number().int(), skipped: z.number().int() }) },
  "arbiter.failed": { payload: z.looseObject({ msg_id: seqId, reason: z.string() }) },
});

/** The arbiter's progress: the last message it has read, and how many ledger items it applied. */
export interface ArbiterProgress {
  watermark: number;
  items: number;
}

export const arbiterFeature: Feature<ArbiterProgress> = {
  name: "arbiter",
  kinds: Object.values(ARBITER_EVENTS),
  empty: () => ({ watermark: 0, items: 0 }),
  apply(progress, event) {
    if (event.type === "arbiter.extracted") {
      const p = as(ARBITER_EVENTS["arbiter.extracted"], event).payload;
      progress.watermark = Math.max(progress.watermark, p.to_msg_id);
      progress.items += p.applied;
    } else if (event.type === "arbiter.failed") {
      progress.watermark = Math.max(progress.watermark, as(ARBITER_EVENTS["arbiter.failed"], event).payload.msg_id);
    }
  },
};
