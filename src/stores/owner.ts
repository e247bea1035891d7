/**
 * Owner ids of store locks (clients/conformance/store.json "ownerId"): a fresh random value per
 * attempt — the only thing a renew and a release prove ownership with, so it must be unguessable —
 * optionally followed by `/<pod name>/<pod uid>` when the holder runs in a Kubernetes pod, so
 * that the controller, which observes store locks without granting them, can show who holds one
 * (status.holder, the pod's holder label). The suffix is public information and adds no secrecy;
 * the random part alone carries it. The controller trusts the suffix no further than a name: it
 * marks a pod only if that pod exists with that uid and is a candidate of the lock
 * (controllers/distributedlock/decide-store.ts).
 */
import { randomUUID } from 'node:crypto';
import type { HolderRef } from '../protocol/holder.ts';

/** MAX_OWNER_BYTES bounds an owner id (store.json): a random part, a pod name of 253, a uid. */
export const MAX_OWNER_BYTES = 400;

const POD_NAME = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;
const POD_UID = /^[A-Za-z0-9-]{1,64}$/;

/**
 * newOwnerId: a random UUID (122 bits from the CSPRNG), and the holder pod when there is one.
 * randomUUID draws from a cached entropy pool: measured, a few microseconds less per acquire than
 * randomBytes(16).toString('hex').
 */
export function newOwnerId(pod?: HolderRef): string {
  const id = randomUUID();
  return pod !== undefined && POD_NAME.test(pod.name) && POD_UID.test(pod.uid) ? `${id}/${pod.name}/${pod.uid}` : id;
}

/** podOfOwner reads the holder pod from an owner id, or undefined when it names none (or not validly). */
export function podOfOwner(owner: string): HolderRef | undefined {
  const parts = owner.split('/');
  if (parts.length !== 3) return undefined;
  const [random = '', name = '', uid = ''] = parts;
  if (random === '' || !POD_NAME.test(name) || !POD_UID.test(uid)) return undefined;
  return { name, uid };
}
