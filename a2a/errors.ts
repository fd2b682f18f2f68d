// Parley's errors as A2A JSON-RPC errors (A2A 1.0 §5.4, §9.5): one table, so every A2A method
// renders a refusal the same way, and the REST code travels with it.
import { A2AError, ERROR_INFO_TYPE, RequestMalformedError, TaskNotFoundError, UnsupportedOperationError, toJsonRpcError } from "@a2a-js/sdk/errors";
import { ParleyError } from "../lib/errors";

export interface JsonRpcErrorObject {
  code: number;
  message: string;
  data?: Record<string, unknown>[];
}

/** JSON-RPC 2.0 and A2A codes used here. */
export const RPC = {
  PARSE_ERROR: -32700,
  INVALID_REQUEST: -32600,
  INVALID_PARAMS: -32602,
  INTERNAL_ERROR: -32603,
  TASK_NOT_FOUND: -32001,
  UNSUPPORTED_OPERATION: -32004,
} as const;

const RETRY_INFO_TYPE = "type.googleapis.com/google.rpc.RetryInfo";

/**
 * Which A2A error a Parley refusal is (the REST status decides, a few codes are named):
 *
 * - no such room (404 room_not_found, 410 room_expired, a room id that is not a UUID): the room is
 *   this agent's task, so TaskNotFoundError -32001 ("invalid, expired, or purged");
 * - the room takes no message now (409 room_closed, not_your_turn, replayed_signature…, and 429
 *   room_full): UnsupportedOperationError -32004, as for a message to a task in a terminal state;
 * - the request as sent is refused (400 validation_error, bad_signature…, 403 signature_required,
 *   agent_key_mismatch, not_participant…, 413, 422 secret_detected): invalid params -32602;
 * - try again later (429 rate_limited and loop_guard, with their wait) and server faults (5xx):
 *   internal error -32603, the spec's example code for a rate limit.
 */
export function a2aKind(err: ParleyError): "not_found" | "unsupported" | "invalid" | "internal" {
  if (err.code === "invalid_uuid" || err.status === 404 || err.status === 410) return "not_found";
  if (err.code === "room_full" || err.status === 409) return "unsupported";
  if (err.status === 429 || err.status >= 500) return "internal";
  return "invalid";
}

/**
 * A Parley error as a JSON-RPC error object: `message` is the REST `detail`, `data[0]` a
 * google.rpc.ErrorInfo whose `metadata.code` is the REST `code` (with the REST body's other
 * members, and `metadata.retry_after` the seconds of Retry-After), plus a google.rpc.RetryInfo
 * when there is a wait.
 */
export function parleyRpcError(err: ParleyError): JsonRpcErrorObject {
  const metadata: Record<string, string> = { code: err.code };
  // The REST body's extra members (secret_detected: kind, field, offset); ErrorInfo metadata values are strings.
  for (const [key, value] of Object.entries(err.extra.fields ?? {})) metadata[key] = String(value);
  if (err.extra.retryAfter !== undefined) metadata.retry_after = String(err.extra.retryAfter);
  const options = { message: err.detail, metadata };
  const kind = a2aKind(err);
  let error: JsonRpcErrorObject;
  if (kind === "not_found") error = toJsonRpcError(new TaskNotFoundError(options));
  else if (kind === "unsupported") error = toJsonRpcError(new UnsupportedOperationError(options));
  else if (kind === "invalid") error = toJsonRpcError(new RequestMalformedError(options));
  else error = { code: RPC.INTERNAL_ERROR, message: err.detail, data: [{ "@type": ERROR_INFO_TYPE, reason: err.code.toUpperCase(), domain: "parley", metadata }] };
  if (err.extra.retryAfter !== undefined) error.data = [...(error.data ?? []), { "@type": RETRY_INFO_TYPE, retryDelay: `${err.extra.retryAfter}s` }];
  return error;
}

/** Any error a method threw, as a JSON-RPC error: Parley's by the table, the SDK's as the SDK maps them, the rest hidden. */
export function rpcErrorOf(err: unknown): JsonRpcErrorObject {
  if (err instanceof ParleyError) return parleyRpcError(err);
  if (err instanceof A2AError) return toJsonRpcError(err);
  console.error(err);
  return { code: RPC.INTERNAL_ERROR, message: "Something went wrong on the server; try again later." };
}

/** Seconds to wait before a retry, when the error says so (for a Retry-After header). */
export const retryAfterOf = (err: unknown): number | undefined => (err instanceof ParleyError ? err.extra.retryAfter : undefined);
