/**
 * The shipped notebooks as a new user sees them in JupyterLab: a copy opened
 * before running (untrusted, no widget state) shows each panel's static
 * snapshot, never a widget's raw repr or a frozen progress bar; after Run All
 * the live panels draw and show values, no output shows an internal
 * traceback, and the dashboard's Kernel tab shows a kernel. No image is
 * broken at either point. Screenshots of both states are kept in
 * Playwright's output directory (test-results/), next to the traces of
 * failed tests.
 */
import { expect, test } from './jupyterlab';
import {
  dashboardKernelTabs,
  expectReadable,
  internalTracebacks,
  NOTEBOOK,
  notebookScreenshot,
  openCopy,
  outputs,
  runAll,
  screenshot
} from './notebooks';

/** A dashboard opened with no kernel named, as a newcomer opens it. */
const PLAIN_DASHBOARD = 'wb.dashboard()  # no kernel named';

test('notebook 02 shows panel snapshots before running and live panels after Run All', async ({ page, lab }, testInfo) => {
  await openCopy(page, lab.url, lab.root, '02-devices-and-occupancy.ipynb', [PLAIN_DASHBOARD]);

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
  await expect(devicePanel).toContainText(/In use\s*\d/);
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
  expect(internalTracebacks(after), 'outputs with an internal traceback').toEqual([]);
  await notebookScreenshot(page, testInfo, '02-after-run-all.png');

  // Every dashboard's Kernel tab shows a chosen kernel with its panel: the
  // notebook's (given a kernel) and one opened with none named.
  const tabs = await dashboardKernelTabs(page);
  expect(tabs.length, 'dashboards with a Kernel tab').toBeGreaterThanOrEqual(2);
  for (const tab of tabs) {
    await tab.show();
    const what = tab.source.includes(PLAIN_DASHBOARD) ? 'wb.dashboard() with no kernel named' : "the notebook's dashboard";
    await expect.soft(tab.options, `${what}: the Kernel tab's drop-down offers the session's kernels`).not.toHaveCount(0);
    await expect.soft(tab.selected, `${what}: a kernel chosen in the Kernel tab`).toHaveText(/\S/, { timeout: 5_000 });
    await expect.soft(tab.body, `${what}: the chosen kernel's panel`).toContainText('dynamic shared (bytes)', { timeout: 5_000 });
    await screenshot(tab.root, testInfo, `02-dashboard-kernel-tab-${tabs.indexOf(tab)}.png`);
  }
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
  expect(internalTracebacks(after), 'outputs with an internal traceback').toEqual([]);
  await notebookScreenshot(page, testInfo, '04-after-run-all.png');
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
