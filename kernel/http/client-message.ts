/**
 * The last filter on any text an error envelope carries to a client. Messages are ours, but some
 * quote a value or a lower layer; whatever slipped through must not carry key or certificate
 * material, terminal colours, stack traces or a dump of unbounded size.
 */

/** Long enough for any message of ours with a quoted value; a longer one is a dump. */
export const MAX_CLIENT_MESSAGE = 2048;

// PEM blocks, whether their newlines are real or JSON-escaped (`\n` inside a dumped object).
const PEM_BLOCK = /-----BEGIN [A-Z0-9 ]+-----[\s\S]*?(?:-----END [A-Z0-9 ]+-----|$)/g;
// CSI and other escape sequences (colours of pretty-printed dumps).
const ANSI_ESCAPE = /\u001b(?:\[[0-?]*[ -/]*[@-~]|[@-Z\\-_])/g;
// A stack trace starts at the first "at <frame>" line.
const STACK_FRAME = /\n\s+at [\s\S]*$/;
// Control characters (and DEL) other than the tab; newlines become spaces.
const CONTROL = /[\u0000-\u0008\u000a-\u001f\u007f]+/g;

export function clientMessage(text: string): string {
  let out = text.replace(PEM_BLOCK, '[redacted]').replace(ANSI_ESCAPE, '').replace(STACK_FRAME, '').replace(CONTROL, ' ').trim();
  if (out.length > MAX_CLIENT_MESSAGE) out = `${out.slice(0, MAX_CLIENT_MESSAGE)}…`;
  return out;
}
