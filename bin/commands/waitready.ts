/** `corrald waitready`: exit 0 once the daemon answers on its unix socket (a service manager's "started"). */
import type { Subcommand } from './index.js';
import { LOCAL_FLAGS_USAGE, parseLocalFlags, sleep, socketRequest, withUsage } from './local-daemon.js';

const USAGE = `Usage: corrald waitready [--dir <path>] [--timeout <seconds>]
Waits until the daemon on <dir> answers GET /1.0 on its unix socket (it opens the socket once it is ready).
${LOCAL_FLAGS_USAGE}`;

/** Pause between two tries. */
const RETRY_MS = 100;

const waitready: Subcommand = {
  summary: 'wait until the daemon answers on its unix socket (exit 1 at --timeout)',
  run: (argv) => withUsage('waitready', USAGE, async () => {
    const flags = parseLocalFlags(argv, process.env);
    if (flags.help) {
      console.log(USAGE);
      return 0;
    }
    const deadline = flags.timeout > 0 ? Date.now() + flags.timeout * 1000 : Infinity;
    for (;;) {
      const left = deadline - Date.now();
      const answer = await socketRequest(flags.dir, 'GET', '/1.0', Math.max(1, Math.min(left, 10_000))).catch(() => undefined);
      if (answer?.status === 200) return 0;
      if (Date.now() + RETRY_MS > deadline) {
        process.stderr.write(`corrald waitready: the daemon on ${flags.dir} did not answer within ${flags.timeout} s\n`);
        return 1;
      }
      await sleep(RETRY_MS);
    }
  }),
};

export default waitready;
