/**
 * The shipped notebooks as a new user sees them in JupyterLab: a copy opened
 * before running (untrusted, no widget state) shows each panel's static
 * snapshot, never a widget's raw repr or a frozen progress bar; after Run All
 * the live panels draw and show values. No image is broken at either point.
 * Screenshots of both states are kept in Playwright's output directory
 * (test-results/), next to the traces of failed tests.
 */
import * as fs from 'fs';
import * as path from 'path';
import { Locator, Page, TestInfo } from '@playwright/test';

import { expect, test } from './jupyterlab';

const NOTEBOOKS = path.resolve(__dirname, '..', '..', 'notebooks');
const NOTEBOOK = '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook';

interface IOutputReport {
  /** Text of every output area. */
  texts: string[];
  /** Sources of images that failed to load (or have no size). */
  broken: string[];
  /** Number of images in outputs. */
  images: number;
}

async function openCopy(page: Page, url: string, root: string, name: string): Promise<void> {
  fs.copyFileSync(path.join(NOTEBOOKS, name), path.join(root, name));
  // Every cell in the DOM (no windowing), so that all outputs can be read.
  const settings = path.join(root, '..', 'settings', '@jupyterlab', 'notebook-extension');
  fs.mkdirSync(settings, { recursive: true });
  fs.writeFileSync(path.join(settings, 'tracker.jupyterlab-settings'), JSON.stringify({ windowingMode: 'none' }));
  // No "get notified about Jupyter news?" toast over the screenshots.
  const apputils = path.join(root, '..', 'settings', '@jupyterlab', 'apputils-extension');
  fs.mkdirSync(apputils, { recursive: true });
  fs.writeFileSync(path.join(apputils, 'notification.jupyterlab-settings'), JSON.stringify({ fetchNews: 'false' }));
  await page.goto(`${url}/lab/tree/${name}?reset`);
  await expect(page.locator(`${NOTEBOOK} .jp-Cell`).first()).toBeVisible();
  await expect(page.locator(`${NOTEBOOK} .jp-OutputArea-output`).first()).toBeVisible();
  await expect(page.locator('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook-ExecutionIndicator'))
    .toHaveAttribute('data-status', 'idle', { timeout: 60_000 });
}

async function outputs(page: Page): Promise<IOutputReport> {
  return page.evaluate(async selector => {
    const images = Array.from(document.querySelectorAll<HTMLImageElement>(`${selector} .jp-OutputArea img`));
    await Promise.all(
      images.map(img => (img.complete ? Promise.resolve() : new Promise(r => img.addEventListener('load', r, { once: true }))))
    );
    return {
      texts: Array.from(document.querySelectorAll<HTMLElement>(`${selector} .jp-OutputArea-output`)).map(
        node => node.innerText
      ),
      broken: images
        .filter(img => !img.complete || img.naturalWidth === 0)
        .map(img => `${img.src.slice(0, 40)} in "${(img.closest('.jp-OutputArea-output') as HTMLElement | null)?.innerText.slice(0, 200)}"`),
      images: images.length
    };
  }, NOTEBOOK);
}

function expectReadable(report: IOutputReport): void {
  for (const text of report.texts) {
    expect(text, 'a raw widget repr').not.toContain('children=(');
    expect(text, 'a frozen progress bar').not.toMatch(/\d+%\|/);
    expect(text, 'a missing value printed as None').not.toMatch(/(^|\s)None(\s|$)/);
  }
  expect(report.broken, 'broken images').toEqual([]);
}

/** A screenshot of one output, kept in the test's output directory. */
async function screenshot(locator: Locator, testInfo: TestInfo, name: string): Promise<void> {
  await locator.scrollIntoViewIfNeeded();
  await locator.screenshot({ path: testInfo.outputPath(name) });
}

async function runAll(page: Page): Promise<void> {
  await page.locator(`${NOTEBOOK} .jp-Cell`).first().click();
  await page.keyboard.press('Escape');
  await page.keyboard.press('Control+Shift+C');
  await page.locator('.lm-CommandPalette-input').fill('Run All Cells');
  await page.keyboard.press('Enter');
  // Every code cell has run once its prompt carries a number.
  await expect
    .poll(
      async () =>
        page.evaluate(
          selector =>
            Array.from(document.querySelectorAll(`${selector} .jp-CodeCell .jp-InputPrompt`)).every(prompt =>
              /\[\d+\]/.test(prompt.textContent ?? '')
            ),
          NOTEBOOK
        ),
      { timeout: 180_000 }
    )
    .toBe(true);
  await expect(page.locator('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook-ExecutionIndicator'))
    .toHaveAttribute('data-status', 'idle', { timeout: 60_000 });
}

test('notebook 02 shows panel snapshots before running and live panels after Run All', async ({ page, lab }, testInfo) => {
  await openCopy(page, lab.url, lab.root, '02-devices-and-occupancy.ipynb');

  // Before running: stored outputs only; each panel is its snapshot.
  const before = await outputs(page);
  expectReadable(before);
  expect(before.images).toBeGreaterThan(0); // the stored occupancy plots
  const snapshots = page.locator(`${NOTEBOOK} .wb-snapshot`);
  await expect(snapshots).toHaveCount(3);
  await expect(snapshots.first()).toContainText('Device panel');
  await expect(snapshots.first()).toContainText('Worker threads');
  await expect(snapshots.nth(1)).toContainText('Kernel panel: stencil');
  await expect(page.locator(`${NOTEBOOK} .jupyter-widgets`)).toHaveCount(0);
  await screenshot(snapshots.first(), testInfo, '02-device-snapshot.png');
  await screenshot(snapshots.nth(1), testInfo, '02-kernel-snapshot.png');

  await runAll(page);

  // After Run All: live panels (widgets), with figures, and nothing raw.
  const devicePanel = page.locator(`${NOTEBOOK} .widget-vbox`).filter({ hasText: 'Worker threads' }).first();
  await expect(devicePanel).toBeVisible();
  await expect(devicePanel).toContainText(/Arena in use\s*\d/);
  await expect(devicePanel).toContainText('need a GPU');
  const kernelPanel = page.locator(`${NOTEBOOK} .widget-vbox`).filter({ hasText: 'dynamic shared (bytes)' }).first();
  await expect(kernelPanel).toBeVisible();
  await expect(kernelPanel.locator('img').first()).toBeVisible();
  await expect(page.locator(`${NOTEBOOK} .widget-tab`).first()).toBeVisible();
  const after = await outputs(page);
  expectReadable(after);
  expect(after.images).toBeGreaterThan(before.images - 1);
  await screenshot(devicePanel, testInfo, '02-device-panel-live.png');
  await screenshot(kernelPanel, testInfo, '02-kernel-panel-live.png');
});

test('notebook 04 shows its sweeps and benchmark panel before and after Run All', async ({ page, lab }, testInfo) => {
  await openCopy(page, lab.url, lab.root, '04-benchmarking.ipynb');
  const before = await outputs(page);
  expectReadable(before);
  const texts = before.texts.join('\n');
  expect(texts).toContain('sweep of 4 points');
  await expect(page.locator(`${NOTEBOOK} .wb-snapshot`)).toHaveCount(1);
  await expect(page.locator(`${NOTEBOOK} .wb-snapshot`)).toContainText('GB/s');
  await screenshot(page.locator(`${NOTEBOOK} .wb-snapshot`), testInfo, '04-benchmark-snapshot.png');

  await runAll(page);
  const panel = page.locator(`${NOTEBOOK} .widget-vbox`).filter({ hasText: 'GFLOP/s' }).last();
  await expect(panel).toBeVisible();
  await expect(panel).toContainText(/Benchmark panel: sweep \w+, 9 points/);
  await expect(panel.locator('img')).toBeVisible();
  const after = await outputs(page);
  expectReadable(after);
  expect(after.texts.join('\n')).toContain('sweep of 9 points');
  await screenshot(panel, testInfo, '04-benchmark-panel-live.png');
});

for (const name of ['01-first-kernel.ipynb', '03-memory.ipynb', '05-kernel-library.ipynb']) {
  test(`${name} opens with readable stored outputs`, async ({ page, lab }, testInfo) => {
    await openCopy(page, lab.url, lab.root, name);
    const report = await outputs(page);
    expectReadable(report);
    expect(report.texts.length).toBeGreaterThan(0);
    const snapshots = page.locator(`${NOTEBOOK} .wb-snapshot`);
    if (name === '03-memory.ipynb') {
      await expect(snapshots).toHaveCount(1);
      await expect(snapshots).toContainText('Device memory');
      await expect(snapshots).toContainText(/in use \d/);
      await screenshot(snapshots, testInfo, '03-memory-snapshot.png');
    }
  });
}
