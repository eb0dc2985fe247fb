/**
 * Whether whoever started node named a V8 flag themselves (on node's command line or in NODE_OPTIONS), in
 * either spelling (`--max-opt`, `--max_opt`) and with or without `no-`: the daemon changes such a flag for
 * a while at times (kernel/boot-optimizer.ts, kernel/boot-garbage.ts), but one an operator chose stays as given.
 */
export function operatorNamedFlag(names: readonly string[]): boolean {
  const alternatives = names.map((name) => name.replace(/[-_]/g, '[-_]')).join('|');
  const named = new RegExp(`(^|\\s)--(no[-_])?(${alternatives})(=|\\s|$)`);
  return [...process.execArgv, process.env.NODE_OPTIONS ?? ''].some((arg) => named.test(arg));
}
