/**
 * The system call names the host knows, for refusing an unknown name in security.syscalls.* when it
 * is set rather than at the next start. liblxc resolves names through libseccomp, which follows the
 * kernel's tables; the same tables ship as the kernel headers' asm/unistd_*.h (package linux-libc-dev),
 * read once when first needed.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { arch } from 'node:os';
import path from 'node:path';

const ASM_DIRS: Record<string, string[]> = {
  x64: ['/usr/include/x86_64-linux-gnu/asm'], arm64: ['/usr/include/aarch64-linux-gnu/asm'],
  ppc64: ['/usr/include/powerpc64le-linux-gnu/asm'], s390x: ['/usr/include/s390x-linux-gnu/asm'], riscv64: ['/usr/include/riscv64-linux-gnu/asm'],
};

let known: Set<string> | null | undefined;

/** Every name of the host's syscall tables (all its ABIs), or null when no table is installed. */
export function hostSyscallNames(): Set<string> | null {
  if (known !== undefined) return known;
  const names = new Set<string>();
  for (const dir of [...(ASM_DIRS[arch()] ?? []), '/usr/include/asm', '/usr/include/asm-generic']) {
    let files: string[] = [];
    try {
      files = readdirSync(dir).filter((f) => /^unistd(_\w+)?\.h$/.test(f));
    } catch {
      continue;
    }
    for (const file of files) {
      const text = readFileSync(path.join(dir, file), 'utf8');
      for (const m of text.matchAll(/^#define __NR_(\w+)\s/gm)) names.add(m[1]!);
    }
  }
  // Only macros, not calls.
  for (const n of ['syscalls', 'arch_specific_syscall']) names.delete(n);
  known = names.size ? names : null;
  return known;
}
