/**
 * The shipped agent for tests: dist/bin/fencepost-agent, the executable the image and the chart
 * run (hack/build-agent.ts compiles it with Bun). Every test that starts an agent or an exec runs
 * these bytes; tests of the controller start Node (src/cli/main.ts), as the image does. The
 * integration project's global setup builds it before any test starts; {@link agentBinary} makes
 * sure once per process (about 0.1 s when it is up to date), for the e2e suite, the soak and the
 * benchmarks.
 */
import { buildAgent } from '../../hack/build-agent.ts';

let built: string | undefined;

/** agentBinary is the path of the agent executable, built from the working tree if it is stale. */
export function agentBinary(): string {
  built ??= buildAgent().path;
  return built;
}
