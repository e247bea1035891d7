/**
 * grant-log.ts — which controller replica made each grant, read from the replicas' own logs, for
 * the fault classes that run several replicas (controller-split, shard-move): every replica logs
 * `Granted Lease` with the pod and the token, in a log file per process start, so a grant seen in
 * a trial's Lease history is attributed to the process that wrote it, and compared with who was
 * entitled to grant then (the elected leader, the shard's owner).
 */
import { readFileSync } from 'node:fs';
import type { LeaseVersion } from '../history.ts';

/** GrantTally counts a trial's grants: all, by a process not entitled then, and found in no log. */
export interface GrantTally {
  readonly grants: number;
  readonly byOther: number;
  readonly unattributed: number;
}

/** readLog is a log file's text, or '' before the process has written it. */
export function readLog(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return '';
  }
}

/** GrantLog reads the replicas' logs incrementally (each file from where it last stopped). */
export class GrantLog {
  /** #grants: `<pod>|<token>` → the replica process identity (its log file's name) that logged the grant. */
  readonly #grants = new Map<string, string>();
  readonly #offsets = new Map<string, number>();

  /** read takes in the complete lines written to `files` since the last read. */
  read(files: Iterable<string>): void {
    for (const file of files) {
      const text = readLog(file);
      const from = this.#offsets.get(file) ?? 0;
      const end = text.lastIndexOf('\n') + 1;
      if (end <= from) continue;
      for (const line of text.slice(from, end).split('\n')) {
        if (!line.includes('"Granted Lease"')) continue;
        try {
          const o = JSON.parse(line) as { holder?: string; token?: string };
          if (o.holder !== undefined && o.token !== undefined)
            this.#grants.set(`${o.holder}|${o.token}`, file.slice(file.lastIndexOf('/') + 1, -'.log'.length));
        } catch {
          /* a torn line */
        }
      }
      this.#offsets.set(file, end);
    }
  }

  /**
   * tally attributes each grant in a trial's Lease history (a version whose token is new) to the
   * replica that logged it, and compares it with `entitledAt(at)`: the identity (`<process>_…`) of
   * the one entitled to grant when that version was seen.
   */
  tally(leases: readonly LeaseVersion[], entitledAt: (at: number) => string): GrantTally {
    let grants = 0;
    let byOther = 0;
    let unattributed = 0;
    let last: bigint | undefined;
    for (const v of leases) {
      if (v.token === undefined || v.token === last || v.holder === undefined) continue;
      last = v.token;
      grants++;
      const by = this.#grants.get(`${v.holder.split('/')[0] ?? ''}|${v.token}`);
      if (by === undefined) unattributed++;
      else if (!entitledAt(v.at).startsWith(`${by}_`)) byOther++;
    }
    return { grants, byOther, unattributed };
  }
}
