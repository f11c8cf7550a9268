// Starts `kvlm serve` (the bundled default model) on a free loopback port, waits until /health
// answers, runs the *.test.mjs files here with node:test against it (KVLM_URL, KVLM_BIN), then
// stops the server with SIGTERM and expects exit status 0.
// Usage: node run.mjs KVLM_BINARY
import { spawn, spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const kvlm = path.resolve(process.argv[2] ?? '');

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function waitReady(url, server, log) {
  for (let i = 0; i < 600; ++i) {
    if (server.exitCode !== null) throw new Error(`kvlm serve exited (${server.exitCode}):\n${log()}`);
    try {
      if ((await fetch(`${url}/health`)).ok) return;
    } catch {
      // not listening yet
    }
    await sleep(100);
  }
  throw new Error(`kvlm serve not ready after 60 s:\n${log()}`);
}

const port = await freePort();
const url = `http://127.0.0.1:${port}`;
let output = '';
const server = spawn(kvlm, ['serve', '--port', String(port), '--max-batch', '8'], { stdio: ['ignore', 'pipe', 'pipe'] });
server.stdout.on('data', (d) => (output += d));
server.stderr.on('data', (d) => (output += d));
const exited = new Promise((resolve) => server.on('exit', (code, signal) => resolve({ code, signal })));

let status = 1;
try {
  await waitReady(url, server, () => output);
  if (!output.includes(`listening on ${url}`)) throw new Error(`no ready line naming ${url}:\n${output}`);
  const files = readdirSync(here).filter((f) => f.endsWith('.test.mjs')).map((f) => path.join(here, f));
  const run = spawnSync(process.execPath, ['--test', ...files], {
    stdio: 'inherit',
    env: { ...process.env, KVLM_URL: url, KVLM_BIN: kvlm },
  });
  status = run.status ?? 1;
} catch (e) {
  console.error(String(e.stack ?? e));
} finally {
  server.kill('SIGTERM');
  const { code, signal } = await exited;
  if (code !== 0) {
    console.error(`kvlm serve ended with code ${code} signal ${signal} after SIGTERM:\n${output}`);
    status = 1;
  }
}
process.exit(status);
