/**
 * `npm run demo -- --web`: the demo's testbed (set up by Demo.setup, exactly as the terminal demo
 * does) driven from a web page instead of a script. This wires the session (the processes), the
 * server (the page) and the events between them; both are stopped with the rest of the testbed.
 */
import type { Cleanups, Demo } from '../demo/story.ts';
import { LEDGER, LOCK, NAMESPACE } from '../demo/story.ts';
import { raceAssets } from './assets.ts';
import type { RaceInfo } from './events.ts';
import type { RaceOptions } from './options.ts';
import type { Action } from './requests.ts';
import { ActionError, RaceServer } from './server.ts';
import { BusyError, RaceSession } from './session.ts';

/** RacePage is the running page. */
export interface RacePage {
  readonly url: string;
  readonly info: RaceInfo;
}

/** startRacePage serves the race page on the demo's testbed (call after demo.setup()). */
export async function startRacePage(demo: Demo, cleanups: Cleanups, o: RaceOptions): Promise<RacePage> {
  const testbed = demo.testbed();
  const info: RaceInfo = {
    namespace: NAMESPACE,
    lock: LOCK,
    key: LEDGER,
    redisUrl: testbed.redisUrl,
    leaseSeconds: testbed.leaseSeconds,
    pauseSeconds: o.pauseSeconds,
    pods: testbed.pods.map((p) => p.name),
  };
  // The session publishes to the server, which acts through the session: the closure below reads
  // `server` only once session.start() has run, after it is constructed.
  const session = new RaceSession({
    testbed,
    lock: LOCK,
    key: LEDGER,
    onLease: (l) => demo.onLease(l),
    publish: (e) => {
      server.publish(e);
    },
  });
  const act = async (a: Action): Promise<unknown> => {
    try {
      switch (a.type) {
        case 'race':
          return await session.race();
        case 'guard':
          return await session.setGuard(a.on);
        case 'freeze':
          return await session.freeze(a.seconds);
        case 'thaw':
          session.thaw();
          return undefined;
      }
    } catch (err) {
      if (err instanceof BusyError) throw new ActionError(409, err.message);
      if (err instanceof RangeError) throw new ActionError(400, err.message);
      throw err;
    }
  };
  const server = new RaceServer({ assets: raceAssets(), info, act, host: o.address.host, port: o.address.port });
  const address = await server.start();
  cleanups.add('race page', () => server.close());
  cleanups.add('race workers', () => session.stop());
  session.start();
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return { url: `http://${host}:${address.port}/`, info };
}
