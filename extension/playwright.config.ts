/**
 * The UI test: Debian's Chromium (never Playwright's own browsers) against a
 * JupyterLab server that the test starts itself (see ui-tests/jupyterlab.ts).
 */
import { defineConfig } from '@playwright/test';

export default defineConfig({
  testDir: './ui-tests',
  timeout: 240_000,
  expect: { timeout: 60_000 },
  workers: 1,
  retries: 0,
  reporter: [['list']],
  outputDir: 'test-results',
  use: {
    browserName: 'chromium',
    headless: true,
    viewport: { width: 1280, height: 1000 },
    launchOptions: {
      executablePath: process.env.CHROMIUM_PATH || '/usr/bin/chromium',
      args: ['--disable-gpu', '--disable-dev-shm-usage']
    },
    screenshot: 'only-on-failure',
    trace: 'retain-on-failure'
  }
});
