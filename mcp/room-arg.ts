const UUID_SEGMENT = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * A room argument is a UUID or a room URL (`https://host/<uuid>`, with or without `?format=md`, or
 * an API URL such as `https://host/api/rooms/<uuid>/messages`). Returns the UUID found in a URL's
 * path, else the trimmed input, which `parseRoomId` accepts or answers with 400 invalid_uuid.
 */
export function roomIdFromArgument(raw: string): string {
  const value = raw.trim();
  if (!value.includes("/")) return value;
  let url: URL;
  try {
    url = new URL(/^[a-z][a-z0-9+.-]*:\/\//i.test(value) ? value : `https://${value}`);
  } catch {
    return value;
  }
  const segment = url.pathname.split("/").find((s) => UUID_SEGMENT.test(s));
  return segment ?? value;
}
