// The compiled agent restarts itself once without JavaScriptCore's JIT, and hands the programs it
// starts the environment it was given (src/cli/interpreter-only.ts). Through the process seam: the
// executable itself is measured by bench/agent-footprint.ts.
import { describe, expect, it } from 'vitest';
import { runInterpreterOnly, type ProcessSeam } from '../../../src/cli/interpreter-only.ts';

interface Call {
  readonly file: string;
  readonly args: readonly string[];
  readonly env: Record<string, string | undefined>;
}

function seam(argv: readonly string[], env: Record<string, string | undefined>): { p: ProcessSeam; calls: Call[] } {
  const calls: Call[] = [];
  return {
    calls,
    p: {
      argv,
      execPath: '/app/bin/fencepost-agent',
      env,
      execve: (file, args, e) => {
        calls.push({ file, args, env: e });
      },
    },
  };
}

const COMPILED = ['bun', '/$bunfs/root/fencepost-agent', 'agent', '--lock', 'db'];

describe('runInterpreterOnly', () => {
  it('replaces the compiled executable with itself, same arguments, the JIT off and a marker', () => {
    const { p, calls } = seam(COMPILED, { HOME: '/home/app' });
    runInterpreterOnly(p);
    expect(calls).toEqual([
      {
        file: '/app/bin/fencepost-agent',
        args: ['/app/bin/fencepost-agent', 'agent', '--lock', 'db'],
        env: { HOME: '/home/app', BUN_JSC_useJIT: '0', FENCEPOST_AGENT_INTERPRETER_ONLY: '1' },
      },
    ]);
  });

  it('the replacement runs on, and removes both variables so that the programs it starts never see them', () => {
    const env = { HOME: '/home/app', BUN_JSC_useJIT: '0', FENCEPOST_AGENT_INTERPRETER_ONLY: '1' };
    const { p, calls } = seam(COMPILED, env);
    runInterpreterOnly(p);
    expect(calls).toEqual([]);
    expect(env).toEqual({ HOME: '/home/app' });
  });

  it.each(['0', '1'])('a BUN_JSC_useJIT=%s the user set stands: nothing replaced, nothing removed', (value) => {
    const env = { BUN_JSC_useJIT: value };
    const { p, calls } = seam(COMPILED, env);
    runInterpreterOnly(p);
    expect(calls).toEqual([]);
    expect(env).toEqual({ BUN_JSC_useJIT: value });
  });

  it('does nothing outside the compiled executable (Node, or `bun run` of the source)', () => {
    for (const argv of [
      ['/usr/bin/node', '/repo/src/cli/main.ts', 'agent'],
      ['/usr/bin/bun', '/repo/src/cli/agent-main.ts', 'agent'],
    ]) {
      const { p, calls } = seam(argv, {});
      runInterpreterOnly(p);
      expect(calls).toEqual([]);
    }
  });

  it('keeps the JIT and runs on when execve fails', () => {
    const env: Record<string, string | undefined> = { HOME: '/h' };
    const p: ProcessSeam = {
      argv: COMPILED,
      execPath: '/app/bin/fencepost-agent',
      env,
      execve: () => {
        throw Object.assign(new Error('EACCES'), { code: 'EACCES' });
      },
    };
    expect(() => {
      runInterpreterOnly(p);
    }).not.toThrow();
    expect(env).toEqual({ HOME: '/h' });
  });

  it('keeps the JIT when the runtime cannot replace the process', () => {
    const env: Record<string, string | undefined> = {};
    expect(() => {
      runInterpreterOnly({ argv: COMPILED, execPath: '/app/bin/fencepost-agent', env });
    }).not.toThrow();
    expect(env).toEqual({});
  });
});
