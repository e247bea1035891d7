/**
 * The flags of `npm run demo -- --web`, checked before anything starts (a bad one is exit 2,
 * naming the flag). Pure.
 */
import { parseBindAddress, type BindAddress } from '../../src/config/bind-address.ts';
import { isLoopbackHost } from '../../src/dashboard/headers.ts';
import { MAX_PAUSE_SECONDS } from './limits.ts';

/** DEFAULT_RACE_ADDRESS: beside the dashboard's 8300. */
export const DEFAULT_RACE_ADDRESS = '127.0.0.1:8301';

/** DEFAULT_PAUSE_SECONDS: the freeze the page proposes, as in Kleppmann's example of a GC pause. */
export const DEFAULT_PAUSE_SECONDS = 15;

/** RaceOptions are the web mode's settings. */
export interface RaceOptions {
  readonly address: BindAddress;
  readonly pauseSeconds: number;
}

/** RaceFlags are the raw flag values (strings as parseArgs gives them). */
export interface RaceFlags {
  readonly address: string;
  readonly pause: string;
  readonly allowRemote: boolean;
}

/** raceOptions validates the flags; throws an Error whose message starts with the flag's name. */
export function raceOptions(f: RaceFlags): RaceOptions {
  const address = parseBindAddress(f.address, '--address');
  if (!isLoopbackHost(address.host) && !f.allowRemote)
    throw new Error(
      `--address: ${JSON.stringify(f.address)} is not a loopback address; whoever reaches the page can freeze processes on this machine. Add --allow-remote if that is meant`,
    );
  const pause = Number(f.pause);
  if (!(Number.isFinite(pause) && pause >= 1 && pause <= MAX_PAUSE_SECONDS))
    throw new Error(
      `--pause: must be a number of seconds from 1 to ${MAX_PAUSE_SECONDS}, got ${JSON.stringify(f.pause)}`,
    );
  return { address, pauseSeconds: pause };
}
