/**
 * Per-lock state files for applications that would rather read a file than call HTTP: while the
 * lock is held, `<dir>/<lock>.json` holds the snapshot (written atomically: temp file + rename);
 * on loss or release it is removed. A file's presence is a hint, not a guarantee — pass the token
 * to the fenced resource, which has the last word.
 */
import { mkdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { LockSnapshot } from './session.ts';

/** StateFiles writes and removes the state files of one directory. */
export interface StateFiles {
  write(s: LockSnapshot): void;
  remove(lock: string): void;
}

/** stateFiles creates dir if needed. */
export function stateFiles(dir: string): StateFiles {
  mkdirSync(dir, { recursive: true });
  return {
    write(s) {
      const file = join(dir, `${s.lock}.json`);
      const tmp = `${file}.${process.pid}.tmp`;
      writeFileSync(tmp, `${JSON.stringify({ ...s, writtenAt: new Date().toISOString() })}\n`);
      renameSync(tmp, file);
    },
    remove(lock) {
      rmSync(join(dir, `${lock}.json`), { force: true });
    },
  };
}
