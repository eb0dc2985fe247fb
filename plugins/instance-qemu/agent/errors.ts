/** Failures the agent reports (an errno name in `code`) or the connection to it suffers. */
export class AgentError extends Error {
  constructor(readonly code: string, message: string) {
    super(message);
    this.name = 'AgentError';
  }
}

export function connectionLost(): AgentError {
  return new AgentError('ECONNRESET', 'The connection to the VM agent was lost');
}
