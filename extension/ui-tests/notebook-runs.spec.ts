/**
 * The shipped notebooks run in JupyterLab as a newcomer runs them (Run All,
 * the simulator, no GPU), checked for what such a run showed wrong:
 * - no output with an internal traceback (a chained one, or a frame inside
 *   `workbench/`), in every notebook run here (and in 02 and 04, run by
 *   shipped-notebooks.spec.ts);
 * - no `# NBVAL...` comment in any code cell of any shipped notebook (nbval
 *   reads its directives from cell metadata tags);
 * - the tune summary's "failed" line not cut in the middle of a reason
 *   without saying so (10);
 * - the status bar and the memory panel giving the same "in use" figure
 *   after a `del`, and again after the panel's "Empty cache" (03).
 *
 * Which notebooks run: 01 (the first mistakes: argument and compile errors),
 * 03 (memory) and 10 (tuning), each about 15 s on the simulator; 02 and 04
 * run in shipped-notebooks.spec.ts. The others are left out to keep the UI
 * test to a few minutes (05 alone takes about 45 s); nbval runs them all in
 * the Python suite. A picture of every notebook after its run is kept in
 * test-results/.
 */
import * as fs from 'fs';
import * as path from 'path';
import { Page } from '@playwright/test';

import { expect, test } from './jupyterlab';
import {
  expectReadable,
  internalTracebacks,
  NOTEBOOK,
  NOTEBOOKS,
  notebookScreenshot,
  openCopy,
  outputs,
  runAll,
  shippedNotebooks
} from './notebooks';

const soft = expect.configure({ soft: true });

test('no shipped notebook keeps an nbval directive as a comment in its code', async ({ lab }) => {
  const found: string[] = [];
  for (const name of shippedNotebooks()) {
    fs.copyFileSync(path.join(NOTEBOOKS, name), path.join(lab.root, name));
    // The notebook as JupyterLab's server hands it to the page.
    const response = await fetch(`${lab.url}/api/contents/${encodeURIComponent(name)}?content=1&type=notebook`);
    expect(response.ok, `${name} served by JupyterLab`).toBe(true);
    const model = (await response.json()) as { content: { cells: { cell_type: string; source: string }[] } };
    model.content.cells.forEach((cell, index) => {
      const directive = /#\s*NBVAL\w*/.exec(cell.source);
      if (cell.cell_type === 'code' && directive) {
        found.push(`${name} cell ${index}: ${directive[0]}`);
      }
    });
  }
  expect(found, 'code cells with an nbval comment').toEqual([]);
});

/** Opens a copy of a shipped notebook, runs it all, and checks every output. */
async function runNotebook(page: Page, lab: { url: string; root: string }, name: string, probes: string[] = []) {
  await openCopy(page, lab.url, lab.root, name, probes);
  await runAll(page);
  const report = await outputs(page);
  expectReadable(report, soft);
  soft(internalTracebacks(report), `${name}: outputs with an internal traceback`).toEqual([]);
  return report;
}

for (const name of ['01-first-kernel.ipynb']) {
  test(`${name} runs with no internal traceback in its outputs`, async ({ page, lab }, testInfo) => {
    const report = await runNotebook(page, lab, name);
    expect(report.texts.length).toBeGreaterThan(0);
    await notebookScreenshot(page, testInfo, `${name.replace('.ipynb', '')}-after-run-all.png`);
  });
}

// ---- the tune summary -------------------------------------------------------------

const REASONS_PROBE = 'import json\nprint("full reasons:", json.dumps([row["reason"] for row in result.failed() + result.limited()]))';

function squeeze(text: string): string {
  return text.replace(/\s+/g, ' ').trim();
}

/**
 * Where `shown` cuts one of the texts `fulls` short without saying so: null
 * when none is shown, or the one shown (the one it shares the longest start
 * with) is whole, or cut after a whole word and followed by an ellipsis;
 * else the place of the cut, `...before|after`.
 */
function unmarkedCut(fulls: string[], shown: string): string | null {
  const text = squeeze(shown);
  let best: { reason: string; start: number; k: number } | null = null;
  for (const full of fulls) {
    const reason = squeeze(full);
    const start = text.indexOf(reason.slice(0, 24));
    if (start < 0) {
      continue;
    }
    let k = 0;
    while (k < reason.length && start + k < text.length && reason[k] === text[start + k]) {
      k++;
    }
    if (!best || k > best.k) {
      best = { reason, start, k };
    }
  }
  if (!best || best.k === best.reason.length) {
    return null;
  }
  const { reason, start, k } = best;
  const midWord = /\w/.test(reason[k - 1] ?? '') && /\w/.test(reason[k]);
  const marked = /^\s*(…|\.\.\.)/.test(text.slice(start + k));
  return !midWord && marked ? null : `...${reason.slice(Math.max(0, k - 30), k)}|${text.slice(start + k, start + k + 10)}`;
}

test('10-autotuning.ipynb runs, and its tune summary cuts no reason short unmarked', async ({ page, lab }, testInfo) => {
  await runNotebook(page, lab, '10-autotuning.ipynb', [REASONS_PROBE]);
  await notebookScreenshot(page, testInfo, '10-autotuning-after-run-all.png');

  const printed = page.locator(`${NOTEBOOK} .jp-OutputArea-output`).filter({ hasText: /^full reasons:/ });
  const reasons = JSON.parse((await printed.innerText()).replace(/^full reasons:/, '')) as string[];
  expect(reasons.length, 'the tune in the notebook has failed or left-out configurations to summarise').toBeGreaterThan(0);

  // The "failed" and "over the device's limits" fields of the tune's HTML summary, and
  // any plain-text line about failures.
  const rows = page
    .locator(`${NOTEBOOK} .jp-OutputArea-output tr`)
    .filter({ has: page.locator('th', { hasText: /^\s*(failed|over the device's limits)\s*$/ }) });
  await expect(rows.first()).toBeVisible();
  const summaries = new Set([
    ...(await rows.allInnerTexts()).map(squeeze),
    ...(await outputs(page)).texts.flatMap(text =>
      text
        .split('\n')
        .filter(line => /\b(failed|limits?)\b/.test(line) && !line.startsWith('full reasons:'))
        .map(squeeze)
    )
  ]);
  const cuts = [...summaries].flatMap(summary => {
    const cut = unmarkedCut(reasons, summary);
    return cut ? [`${summary.slice(0, 60)}...: ${cut}`] : [];
  });
  await rows.first().scrollIntoViewIfNeeded();
  await rows.first().locator('xpath=ancestor::div[contains(@class,"jp-OutputArea-output")]').screenshot({
    path: testInfo.outputPath('10-tune-summary.png')
  });
  expect(cuts, 'summaries that cut a reason short without an ellipsis').toEqual([]);
});

// ---- the status bar and the memory panel ---------------------------------------------

/** 1 GiB allocated and freed: in use goes back, the pool keeps it cached. */
const DEL_PROBE = 'big = wb.allocate((1 << 27,), np.float64)   # 1 GiB\ndel big';

const UNITS: Record<string, number> = { B: 1, KiB: 2 ** 10, MiB: 2 ** 20, GiB: 2 ** 30, TiB: 2 ** 40 };

interface IFigure {
  text: string;
  bytes: number;
  /** Half a unit of the last digit shown. */
  rounding: number;
}

function figure(number: string, unit: string, text: string): IFigure {
  const decimals = number.includes('.') ? number.split('.')[1].length : 0;
  return { text, bytes: parseFloat(number.replace(/,/g, '')) * UNITS[unit], rounding: (0.5 * UNITS[unit]) / 10 ** decimals };
}

/** The "in use" figure of a text ("in use 1.01 GiB"). */
function inUse(text: string): IFigure | null {
  const match = /\bin use:?\s+([\d.,]+)\s*(B|KiB|MiB|GiB|TiB)\b/.exec(text);
  return match ? figure(match[1], match[2], match[0]) : null;
}

/**
 * The status bar's memory in use: "in use X unit"; "in use X · cached Y / Z GiB" (one unit
 * for the figures of the label); else the X of "X/Y GiB".
 */
function statusInUse(text: string): IFigure | null {
  const shared = /\bin use:?\s+([\d.,]+)\b[^]*?\b(B|KiB|MiB|GiB|TiB)\b/.exec(text);
  const match = /([\d.]+)\s*\/\s*[\d.]+\s*(B|KiB|MiB|GiB|TiB)\b/.exec(text);
  return (
    inUse(text) ??
    (shared ? figure(shared[1], shared[2], shared[0]) : null) ??
    (match ? figure(match[1], match[2], match[0]) : null)
  );
}

/** Whether two shown figures can be the same number of bytes. */
function agree(a: IFigure | null, b: IFigure | null): boolean {
  return !!a && !!b && Math.abs(a.bytes - b.bytes) <= a.rounding + b.rounding;
}

test('03-memory.ipynb runs, and the status bar and the memory panel agree after del and Empty cache', async ({ page, lab }, testInfo) => {
  await runNotebook(page, lab, '03-memory.ipynb', [DEL_PROBE]);
  await notebookScreenshot(page, testInfo, '03-memory-after-run-all.png');

  const status = page.locator('.jp-WorkbenchStatus');
  const panel = page
    .locator(`${NOTEBOOK} .widget-vbox`)
    .filter({ has: page.getByRole('button', { name: 'Empty cache' }) })
    .first();
  await expect(status).toBeVisible();
  await expect(panel).toBeVisible();
  // "the same" once they agree, else both texts, for the report.
  const figures = async () => {
    const [bar, shown] = [await status.innerText(), await panel.innerText()];
    const panelFigure = inUse(shown)?.text ?? `no "in use" in ${shown.slice(0, 200)}`;
    return agree(statusInUse(bar), inUse(shown)) ? 'the same' : `status bar "${bar}", memory panel "${panelFigure}"`;
  };

  // After `del big`: 1 GiB is cached, none of it in use.
  await soft
    .poll(figures, { message: 'status bar and memory panel after del: the same "in use"', timeout: 15_000 })
    .toBe('the same');
  await panel.scrollIntoViewIfNeeded();
  await page.screenshot({ path: testInfo.outputPath('03-status-and-panel-after-del.png') });

  // "Empty cache" frees the cache with no cell run: the status bar follows.
  await panel.getByRole('button', { name: 'Empty cache' }).click();
  await soft
    .poll(figures, { message: 'status bar and memory panel after Empty cache: the same "in use"', timeout: 15_000 })
    .toBe('the same');
  await panel.scrollIntoViewIfNeeded();
  await page.screenshot({ path: testInfo.outputPath('03-status-and-panel-after-empty-cache.png') });
});
