// Shared by the SDK tests: the server under test (set by run.mjs) and `kvlm generate`, whose
// greedy output is what the server must reproduce for the same prompt.
import { spawnSync } from 'node:child_process';

export const url = process.env.KVLM_URL;
export const kvlm = process.env.KVLM_BIN;
if (!url || !kvlm) throw new Error('run these tests through run.mjs (KVLM_URL and KVLM_BIN unset)');

// `kvlm generate` at temperature 0 with the bundled model; its stdout is the text plus '\n'.
export function generate(prompt, maxTokens, { chat = false } = {}) {
  const args = ['generate', '--temp', '0', '--max-tokens', String(maxTokens), ...(chat ? ['--chat'] : []), prompt];
  const r = spawnSync(kvlm, args, { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`kvlm generate failed (${r.status}): ${r.stderr}`);
  if (!r.stdout.endsWith('\n')) throw new Error(`kvlm generate output without its final newline: ${r.stdout}`);
  return r.stdout.slice(0, -1);
}
