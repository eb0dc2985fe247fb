/**
 * Subcommands of `corrald` (`corrald <name> ...`), one file each under bin/commands/. Without a
 * subcommand corrald runs the daemon. Each returns its exit code.
 */
export interface Subcommand {
  /** One line for `corrald --help`. */
  summary: string;
  run(argv: string[]): Promise<number>;
}

export const SUBCOMMANDS: Record<string, () => Promise<Subcommand>> = {
  image: async () => (await import('./image.js')).image,
  init: async () => (await import('./init.js')).default,
  shutdown: async () => (await import('./shutdown.js')).default,
  waitready: async () => (await import('./waitready.js')).default,
};
