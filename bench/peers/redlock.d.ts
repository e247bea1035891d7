/**
 * node-redlock 5.0.0-beta.2 ships its types at dist/index.d.ts but its package.json "exports"
 * does not point at them, so TypeScript cannot find them: the part the benchmark uses, declared.
 */
declare module 'redlock' {
  import type { EventEmitter } from 'node:events';
  import type { Redis } from 'ioredis';

  interface Settings {
    readonly driftFactor?: number;
    readonly retryCount?: number;
    readonly retryDelay?: number;
    readonly retryJitter?: number;
  }
  interface Lock {
    readonly value: string;
    release(): Promise<unknown>;
  }
  // eslint-disable-next-line no-restricted-syntax -- the package's own shape: a default export
  export default class Redlock extends EventEmitter {
    constructor(clients: Iterable<Redis>, settings?: Partial<Settings>);
    acquire(resources: string[], duration: number, settings?: Partial<Settings>): Promise<Lock>;
    quit(): Promise<void>;
  }
}
