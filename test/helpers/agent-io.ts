/** Reading what an agent exec session gives back, for the guest agent's tests. */
import type { Readable } from 'node:stream';
import type { ExecSession } from '../../sdk/index.js';

export async function collect(stream: Readable | undefined): Promise<string> {
  if (!stream) return '';
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/** Runs to the end: exit code and both outputs. */
export async function finish(session: ExecSession, input?: string): Promise<{ code: number; stdout: string; stderr: string }> {
  if (input !== undefined) session.stdin.end(input);
  else session.stdin.end();
  const [stdout, stderr, code] = await Promise.all([collect(session.stdout), collect(session.stderr), session.exited]);
  return { code, stdout, stderr };
}
