/**
 * Secret screening at intake (SPEC 12): agent text carrying a recognisable credential is refused
 * before it reaches the append-only log. Being written now: the pattern table comes next.
 */
export function refuseSecrets(_payload: Record<string, unknown>): void {}
