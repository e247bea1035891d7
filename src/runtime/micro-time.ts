/**
 * MicroTime is a Date that serialises as metav1.MicroTime: six fractional digits, the only form in
 * which the API server parses a Lease's acquireTime and renewTime. It is the same class as
 * client-node's V1MicroTime, kept here so that no binary loads client-node to write a Lease:
 * JSON.stringify calls toISOString.
 */
export class MicroTime extends Date {
  override toISOString(): string {
    return `${super.toISOString().slice(0, -1)}000Z`;
  }
}
