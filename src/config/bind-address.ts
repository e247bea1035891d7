/**
 * Listener addresses given on the command line (`--metrics-bind-address`, `--listen`, ...): parsed
 * when the flags are, so that a malformed one is a usage error (exit 2, naming the flag) before
 * anything starts listening.
 */
import { UsageError } from './usage-error.ts';

/** BindAddress is a parsed "host:port"; an empty host means every interface (0.0.0.0). */
export interface BindAddress {
  readonly host: string;
  readonly port: number;
}

/** parseBindAddress splits "host:port" (IPv6 in brackets); throws a UsageError naming the flag. */
export function parseBindAddress(addr: string, flag: string): BindAddress {
  const m = /^(\[[^\]]+\]|[^:]*):(\d{1,5})$/.exec(addr);
  const port = Number(m?.[2]);
  if (m === null || port > 65535)
    throw new UsageError(flag, `expected host:port (e.g. 0.0.0.0:8080 or 127.0.0.1:0), got ${JSON.stringify(addr)}`);
  const host = (m[1] ?? '').replace(/^\[|\]$/g, '');
  return { host: host === '' ? '0.0.0.0' : host, port };
}

/** checkListenerFlag returns addr when it is "0" (listener off) or a valid host:port; throws a UsageError otherwise. */
export function checkListenerFlag(addr: string, flag: string): string {
  if (addr !== '0') parseBindAddress(addr, flag);
  return addr;
}
