import { InstanceFileError } from '../../../sdk/index.js';

/**
 * Failures the agent reports (an errno name in `code`) or the connection to it suffers. File
 * errors reach the family's routes as the InstanceFileError they are.
 */
export class AgentError extends InstanceFileError {
  constructor(code: string, message: string) {
    super(code, message);
    this.name = 'AgentError';
  }
}

export function connectionLost(): AgentError {
  return new AgentError('ECONNRESET', 'The connection to the VM agent was lost');
}
