/**
 * Per-lock state files for applications that would rather read a file than call HTTP: while the
 * lock is held, `<dir>/<lock>.json` holds the snapshot (written atomically: temp file + rename);
 * on loss or release it is removed. A file's presence is a hint, not a guarantee — pass the token
 * to the fenced resource, which has the last word.
 *
 * An agent that is SIGKILLed (or paused) cannot remove its file, so the file says itself until
 * when it may be trusted: `validUntil`, the wall-clock time at which this agent's term ends unless
 * it renews (written + expiresInMs; reader and agent share the pod's node, so one clock). Readers
 * treat the lock as held only while now < validUntil. A restarting agent removes its locks' files
 * before anything else (`clear`), so a file left by its previous process never outlives it.
 */
import { mkdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { LockSnapshot } from './session.ts';

/** StateFiles writes and removes the state files of one directory. */
export interface StateFiles {
  write(s: LockSnapshot): void;
  remove(lock: string): void;
  /**
   * writeAgent writes `<dir>/<lock>.agent.json`, where this lock's agent listens, for as long as
   * the agent runs: an application finds its agent there when a default port was taken and the
   * agent moved to a free one. (Lock names have no dots, so it never clashes with a state file.)
   */
  writeAgent(lock: string, where: AgentAddresses): void;
  removeAgent(lock: string): void;
}

/** AgentAddresses is what `<dir>/<lock>.agent.json` holds. */
export interface AgentAddresses {
  /** api is the lock API's base URL (http://127.0.0.1:PORT): FENCEPOST_AGENT_URL for the clients. */
  readonly api: string;
  /** healthProbes and metrics are the bound host:port, or "off". */
  readonly healthProbes: string;
  readonly metrics: string;
  readonly pid: number;
}

/** StateFile is what `<dir>/<lock>.json` holds: the snapshot, when it was written, and until when it holds. */
export interface StateFile extends LockSnapshot {
  readonly writtenAt: string;
  readonly validUntil: string | undefined;
}

/** stateFiles creates dir if needed. */
export function stateFiles(dir: string): StateFiles {
  mkdirSync(dir, { recursive: true });
  return {
    write(s) {
      const file = join(dir, `${s.lock}.json`);
      const tmp = `${file}.${process.pid}.tmp`;
      const now = Date.now();
      const body: StateFile = {
        ...s,
        writtenAt: new Date(now).toISOString(),
        validUntil: s.expiresInMs !== undefined ? new Date(now + s.expiresInMs).toISOString() : undefined,
      };
      writeFileSync(tmp, `${JSON.stringify(body)}\n`);
      renameSync(tmp, file);
    },
    remove(lock) {
      rmSync(join(dir, `${lock}.json`), { force: true });
    },
    writeAgent(lock, where) {
      const file = join(dir, `${lock}.agent.json`);
      const tmp = `${file}.${process.pid}.tmp`;
      writeFileSync(tmp, `${JSON.stringify(where)}\n`);
      renameSync(tmp, file);
    },
    removeAgent(lock) {
      rmSync(join(dir, `${lock}.agent.json`), { force: true });
    },
  };
}
