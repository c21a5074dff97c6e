/**
 * A throw-away JupyterLab server for the UI test: random free port on
 * 127.0.0.1, no token, its own temp directory for notebooks, settings,
 * runtime files and IPython profile, this checkout's labextension (built
 * into ../workbench/labextension) and this checkout's `workbench` package on
 * the kernel's path. Stopped (with its kernels) when the worker ends.
 */
import { expect, test as base } from '@playwright/test';
import { ChildProcess, spawn } from 'child_process';
import * as fs from 'fs';
import * as net from 'net';
import * as os from 'os';
import * as path from 'path';

const EXTENSION_DIR = path.resolve(__dirname, '..');
const REPO_ROOT = path.resolve(EXTENSION_DIR, '..');
const LABEXTENSION = path.join(REPO_ROOT, 'workbench', 'labextension');

export interface ILabServer {
  url: string;
  /** The directory the server serves; notebooks go here. */
  root: string;
  /** Everything the server printed so far. */
  log(): string;
}

function python(): string {
  if (process.env.JUPYTER_PYTHON) {
    return process.env.JUPYTER_PYTHON;
  }
  if (process.env.VIRTUAL_ENV) {
    return path.join(process.env.VIRTUAL_ENV, 'bin', 'python');
  }
  const venv = path.join(REPO_ROOT, '.venv', 'bin', 'python');
  return fs.existsSync(venv) ? venv : 'python3';
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

async function waitForServer(url: string, proc: ChildProcess, log: () => string): Promise<void> {
  const deadline = Date.now() + 90_000;
  while (Date.now() < deadline) {
    if (proc.exitCode !== null) {
      throw new Error(`JupyterLab exited with ${proc.exitCode}:\n${log()}`);
    }
    try {
      const response = await fetch(`${url}/api/status`);
      if (response.ok) {
        return;
      }
    } catch {
      // not listening yet
    }
    await new Promise(r => setTimeout(r, 250));
  }
  throw new Error(`JupyterLab did not answer on ${url} within 90 s:\n${log()}`);
}

async function stop(proc: ChildProcess): Promise<void> {
  if (proc.exitCode !== null || proc.pid === undefined) {
    return;
  }
  const exited = new Promise(resolve => proc.once('exit', resolve));
  // The server runs in its own process group with its kernels: end that group.
  process.kill(-proc.pid, 'SIGTERM');
  const timer = setTimeout(() => {
    if (proc.exitCode === null && proc.pid !== undefined) {
      process.kill(-proc.pid, 'SIGKILL');
    }
  }, 10_000);
  await exited;
  clearTimeout(timer);
}

export async function startJupyterLab(): Promise<{ server: ILabServer; close: () => Promise<void> }> {
  if (!fs.existsSync(path.join(LABEXTENSION, 'package.json'))) {
    throw new Error(`no built labextension in ${LABEXTENSION}: run npm run build first`);
  }
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'cuda-workbench-ui-'));
  const dirs = Object.fromEntries(
    ['root', 'data', 'config', 'runtime', 'ipython', 'settings', 'workspaces'].map(name => {
      const dir = path.join(tmp, name);
      fs.mkdirSync(dir, { recursive: true });
      return [name, dir];
    })
  );
  fs.mkdirSync(path.join(dirs.data, 'labextensions'));
  fs.symlinkSync(LABEXTENSION, path.join(dirs.data, 'labextensions', 'cuda-workbench'));

  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const env = {
    ...process.env,
    JUPYTER_PATH: [dirs.data, process.env.JUPYTER_PATH].filter(Boolean).join(path.delimiter),
    JUPYTER_CONFIG_DIR: dirs.config,
    JUPYTER_RUNTIME_DIR: dirs.runtime,
    JUPYTERLAB_SETTINGS_DIR: dirs.settings,
    JUPYTERLAB_WORKSPACES_DIR: dirs.workspaces,
    IPYTHONDIR: dirs.ipython,
    PYTHONPATH: [REPO_ROOT, process.env.PYTHONPATH].filter(Boolean).join(path.delimiter)
  };
  const args = [
    '-m',
    'jupyterlab',
    '--no-browser',
    '--ip=127.0.0.1',
    `--port=${port}`,
    '--ServerApp.port_retries=0',
    '--IdentityProvider.token=',
    '--ServerApp.password=',
    `--ServerApp.root_dir=${dirs.root}`,
    '--LabApp.news_url=None',
    '--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate',
    // CI containers often run as root, which Jupyter refuses by default.
    ...(process.getuid?.() === 0 ? ['--allow-root'] : [])
  ];
  const chunks: string[] = [];
  const proc = spawn(python(), args, { env, cwd: dirs.root, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  proc.stdout!.on('data', data => chunks.push(String(data)));
  proc.stderr!.on('data', data => chunks.push(String(data)));
  const log = () => chunks.join('');
  const close = async () => {
    await stop(proc);
    fs.rmSync(tmp, { recursive: true, force: true });
  };
  try {
    await waitForServer(url, proc, log);
  } catch (error) {
    await close();
    throw error;
  }
  return { server: { url, root: dirs.root, log }, close };
}

/**
 * Shuts down every kernel of the server: a test's kernels (and the panels'
 * sampling threads in them) must not take the CPU from the next test.
 */
async function shutdownKernels(url: string): Promise<void> {
  const sessions = (await (await fetch(`${url}/api/sessions`)).json()) as { id: string }[];
  await Promise.all(sessions.map(s => fetch(`${url}/api/sessions/${s.id}`, { method: 'DELETE' })));
}

/**
 * `test` with a worker-scoped `lab` server, failing any test during which
 * the page threw an uncaught error or logged an error naming this extension;
 * each test's kernels are shut down when it ends.
 */
export const test = base.extend<{ pageErrors: string[]; kernels: void }, { lab: ILabServer }>({
  lab: [
    // eslint-disable-next-line no-empty-pattern
    async ({}, use) => {
      const { server, close } = await startJupyterLab();
      try {
        await use(server);
      } finally {
        await close();
      }
    },
    { scope: 'worker' }
  ],
  pageErrors: [
    async ({ page }, use) => {
      const errors: string[] = [];
      page.on('pageerror', error => errors.push(`uncaught: ${error.stack ?? error}`));
      page.on('console', message => {
        if (message.type() === 'error' && /cuda-workbench/i.test(message.text())) {
          errors.push(`console: ${message.text()}`);
        }
      });
      await use(errors);
      expect(errors).toEqual([]);
    },
    { auto: true }
  ],
  kernels: [
    async ({ lab }, use) => {
      await use();
      await shutdownKernels(lab.url);
    },
    { auto: true }
  ]
});

export { expect };
