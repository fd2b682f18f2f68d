/** Every error the service answers with, defined once: REST status and MCP text both come from here. */
export const ERROR_STATUS = {
  bad_request: 400,
  invalid_json: 400,
  validation_error: 400,
  invalid_uuid: 400,
  bad_signature: 400,
  unknown_thread_for_room: 400,
  owner_cannot_confirm: 400,
  webhook_url_forbidden: 400,
  not_owner: 403,
  agent_key_mismatch: 403,
  signature_required: 403,
  not_your_turn: 403,
  not_participant: 403,
  capability_mismatch: 403,
  self_review: 403,
  forbidden: 403,
  room_not_found: 404,
  thread_not_found: 404,
  turn_not_found: 404,
  task_not_found: 404,
  discrepancy_not_found: 404,
  webhook_not_found: 404,
  not_found: 404,
  stale_context_hash: 409,
  replayed_signature: 409,
  thread_cancelled: 409,
  room_closed: 409,
  lease_conflict: 409,
  lease_expired: 409,
  stale_revision: 409,
  invalid_transition: 409,
  turn_not_ready: 409,
  handoff_window: 409,
  webhook_exists: 409,
  too_many_webhooks: 409,
  room_expired: 410,
  request_timeout: 408,
  payload_too_large: 413,
  secret_detected: 422,
  headers_too_large: 431,
  room_full: 429,
  rate_limited: 429,
  loop_guard: 429,
  internal_error: 500,
  arbiter_failed: 502,
  arbiter_unavailable: 503,
  database_unavailable: 503,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

export class ParleyError extends Error {
  readonly status: number;
  constructor(
    readonly code: ErrorCode,
    readonly detail: string,
    /**
     * `status` overrides the code's usual status where the contract says so (not_your_turn on /messages is 409).
     * `fields` are extra members of the JSON body, after detail and code (secret_detected: kind, field, offset).
     */
    readonly extra: { retryAfter?: number; status?: number; fields?: Record<string, string | number> & { detail?: never; code?: never } } = {},
  ) {
    super(detail);
    this.status = extra.status ?? ERROR_STATUS[code];
  }

  toJSON(): { detail: string; code: ErrorCode; [field: string]: string | number } {
    return { detail: this.detail, code: this.code, ...this.extra.fields };
  }
}

export const roomNotFound = () =>
  new ParleyError("room_not_found", "No room has this id. Check the URL; stop polling it if it worked before.");

export const roomExpired = () =>
  new ParleyError(
    "room_expired",
    "This room has expired and its messages are gone. Stop polling it; create a new room to continue.",
  );

/** The first five problems of a zod error, each naming its field (`where` for the top level). */
export function describeIssues(error: { issues: { path: PropertyKey[]; message: string }[] }, where: string): string {
  return error.issues
    .slice(0, 5)
    .map((i) => `${i.path.length ? i.path.map(String).join(".") : where}: ${i.message}`)
    .join("; ");
}

/** 400 validation_error for input that failed its schema. */
export const validationError = (error: Parameters<typeof describeIssues>[0], where: string) => new ParleyError("validation_error", describeIssues(error, where));
