/** The line protocol between the trial runner and a worker process (test/safety/worker.ts). */

/** JoinCommand starts a lock session for one trial as one pod incarnation. */
export interface JoinCommand {
  readonly cmd: 'join';
  readonly trial: string;
  readonly lock: string;
  readonly namespace: string;
  readonly pod: string;
  readonly uid: string;
  /** fenced: write through the Redis guard (false only in calibration runs). */
  readonly fenced: boolean;
  /** dataPrefix: the trial's store key prefix (`<prefix>fence`, `<prefix>w:<writeId>`). */
  readonly dataPrefix: string;
  readonly thinkMs: number;
  readonly intervalMs: number;
  /**
   * workload: 'multi-key' writes and deletes a shared set of keys through the lock-scoped guard
   * (test/safety/multi-key-worker.ts); 'semaphore' asks for a permit of a Semaphore lock, fences
   * each write per permit (`<prefix>fence:<permit>`), releases after about `holdMs` of holding
   * and asks again after about `gapMs`; absent: one new key per write (the default workload).
   */
  readonly workload?: 'multi-key' | 'semaphore';
  /** keyScope: the multi-key guard's marks, 'lock' (the default) or 'key' (calibration only). */
  readonly keyScope?: 'lock' | 'key';
  /** holdMs, gapMs: the semaphore workload's mean hold and re-request gap (each drawn from ×[0.5, 1.5]). */
  readonly holdMs?: number;
  readonly gapMs?: number;
}

/** LeaveCommand stops a trial's session, releasing the lock first when `release`. */
export interface LeaveCommand {
  readonly cmd: 'leave';
  readonly trial: string;
  readonly release: boolean;
}

export type WorkerCommand = JoinCommand | LeaveCommand;

/** WorkerOutput is one event line; tokens are decimal strings. */
export interface WorkerOutput {
  readonly trial: string;
  readonly kind:
    | 'ready'
    | 'joined'
    | 'left'
    | 'failed'
    | 'granted'
    | 'renewed'
    | 'lost'
    | 'released'
    | 'draining'
    | 'handoverCancelled'
    | 'check'
    | 'attempt'
    | 'outcome';
  readonly holder: string;
  readonly token?: string;
  readonly writeId?: string;
  readonly afterValidUntil?: boolean;
  readonly result?: 'accepted' | 'stale' | 'error';
  readonly reason?: string;
  readonly detail?: string;
  /** op, key: with check/attempt/outcome of the multi-key workload, what the write does to which key. */
  readonly op?: 'set' | 'del';
  readonly key?: string;
  /** expiresInMs: with granted/renewed, the validity left at that moment (the apiserver fault's deadline tracking). */
  readonly expiresInMs?: number;
}

/** parseWorkerOutput reads one stdout line; undefined for anything that is not an event. */
export function parseWorkerOutput(line: string): WorkerOutput | undefined {
  try {
    const o = JSON.parse(line) as Partial<WorkerOutput>;
    if (typeof o.kind !== 'string' || typeof o.trial !== 'string' || typeof o.holder !== 'string') return undefined;
    return o as WorkerOutput;
  } catch {
    return undefined;
  }
}
