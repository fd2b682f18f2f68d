/**
 * The bench's client processes (the delivery readers, the turns agents): forked with an IPC
 * channel, running TypeScript through tsx, and answering the bench over that channel.
 */
import { fork, type ChildProcess } from "node:child_process";

/** `file` in a process of its own, with `args`, its output on the bench's and an IPC channel. */
export const forkClient = (file: string, args: string[] = []): ChildProcess =>
  fork(file, args, { execArgv: ["--import", "tsx"], stdio: ["ignore", "inherit", "inherit", "ipc"] });

/** Sends `message` to the bench process; resolves once it is written. */
export function sendToParent(message: unknown): Promise<void> {
  return new Promise((resolve, reject) => process.send!(message, (err: Error | null) => (err ? reject(err) : resolve())));
}
