/**
 * Flag parsing shared by every `fencepost` subcommand: node:util `parseArgs`, with
 *
 * - every problem reported as a {@link UsageError} of one line naming the flag (`parseArgs`'s own
 *   errors carry the flag only in their message text, some of them over three lines);
 * - boolean flags with the grammar of spf13/pflag, which kubebuilder and controller-runtime
 *   operators parse their flags with: `--leader-elect` alone means true, and `--leader-elect=true`,
 *   `--leader-elect=false` (or any word Go's strconv.ParseBool reads: 1, t, T, TRUE, True, 0, f,
 *   F, FALSE, False) set it explicitly.
 *
 * One deliberate difference from pflag: `--leader-elect false` (the value as the next word) is
 * also read as false. pflag would set the flag to true and leave `false` as a positional argument,
 * which a kubebuilder `main` silently ignores — the opposite of what was written. fencepost's
 * subcommands take no positional arguments, so that next word cannot mean anything else; reading
 * it as the value is the only reading that is not a trap, and it keeps earlier command lines
 * working. Any other next word (`--leader-elect yes`) is a usage error naming the flag.
 */
import { parseArgs, type ParseArgsOptionsConfig } from 'node:util';
import { UsageError } from './usage-error.ts';

const TRUE_WORDS: ReadonlySet<string> = new Set(['1', 't', 'T', 'true', 'TRUE', 'True']);
const FALSE_WORDS: ReadonlySet<string> = new Set(['0', 'f', 'F', 'false', 'FALSE', 'False']);

/** boolWord reads one of strconv.ParseBool's words as 'true' or 'false'; undefined for any other text. */
function boolWord(text: string): 'true' | 'false' | undefined {
  return TRUE_WORDS.has(text) ? 'true' : FALSE_WORDS.has(text) ? 'false' : undefined;
}

/**
 * parseFlags parses `argv` (the words after the subcommand) against `options`, long flags only,
 * no positional arguments, and returns parseArgs's `values`.
 *
 * `booleans` names the flags with pflag's boolean grammar (see the module comment). Declare them
 * in `options` as `{ type: 'string', default: 'true' | 'false' }`: their value always arrives as
 * exactly `'true'` or `'false'`.
 *
 * @throws UsageError, one line naming the flag, for: an unknown flag (`--bogus: unknown flag`); a
 * flag without its value (`--workers: missing value`); a value that looks like a flag
 * (`--namespace --workers`: ambiguous, as parseArgs says; write `--namespace=--workers` if meant);
 * a bad boolean; a positional argument. Values are not validated here beyond that.
 */
export function parseFlags<const O extends ParseArgsOptionsConfig>(
  argv: readonly string[],
  options: O,
  booleans: readonly (keyof O & string)[] = [],
) {
  const isBool = (name: string): boolean => (booleans as readonly string[]).includes(name);
  const lenient: ParseArgsOptionsConfig = Object.fromEntries(
    Object.entries(options).map(([name, o]) => [
      name,
      isBool(name) ? { type: 'boolean' } : { type: o.type, multiple: o.multiple ?? false },
    ]),
  );
  // Pass 1, lenient: parseArgs never throws and hands over every token; we judge each one ourselves.
  const { tokens } = parseArgs({
    args: [...argv],
    options: lenient,
    strict: false,
    allowPositionals: true,
    tokens: true,
  });
  const args: string[] = [];
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i];
    if (t === undefined || t.kind === 'option-terminator') continue;
    if (t.kind === 'positional')
      throw new UsageError(JSON.stringify(t.value), 'unexpected argument; this command takes flags only');
    const declared = Object.hasOwn(options, t.name) ? options[t.name] : undefined;
    if (declared === undefined || !t.rawName.startsWith('--'))
      throw new UsageError(t.rawName, 'unknown flag (see --help)');
    if (isBool(t.name)) {
      const next = tokens[i + 1];
      const text = t.value ?? (next?.kind === 'positional' && next.index === t.index + 1 ? next.value : undefined);
      if (t.value === undefined && text !== undefined) i++; // `--flag false`: the next word was the value
      const word = text === undefined ? 'true' : boolWord(text);
      if (word === undefined) throw new UsageError(t.rawName, `must be true or false, got ${JSON.stringify(text)}`);
      args.push(`${t.rawName}=${word}`);
      continue;
    }
    if (t.value === undefined) throw new UsageError(t.rawName, `missing value (use ${t.rawName}=VALUE)`);
    if (t.inlineValue !== true && t.value.startsWith('-')) {
      throw new UsageError(
        t.rawName,
        `ambiguous value ${JSON.stringify(t.value)}, which looks like a flag; write ${t.rawName}=VALUE (the value is missing, or starts with a dash)`,
      );
    }
    args.push(`${t.rawName}=${t.value}`);
  }
  // Pass 2, strict, over the normalized `--name=value` words: typed values, defaults applied. It
  // cannot meet a problem pass 1 let through; should it, it still ends as a usage error.
  try {
    return parseArgs({ args, options, strict: true, allowPositionals: false }).values;
  } catch (err) {
    if (isParseArgsError(err)) throw new UsageError('flags', err.message.split('\n')[0] ?? err.message);
    throw err;
  }
}

/** isParseArgsError: one of node:util parseArgs's errors (codes ERR_PARSE_ARGS_*). */
function isParseArgsError(err: unknown): err is Error {
  const code = (err as { code?: unknown } | null | undefined)?.code;
  return err instanceof Error && typeof code === 'string' && code.startsWith('ERR_PARSE_ARGS_');
}
