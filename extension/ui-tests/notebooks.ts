/**
 * The shipped notebooks in the UI tests: a copy opened in JupyterLab (with
 * probe cells appended where a test needs one), its outputs read as a user
 * sees them, Run All, screenshots, and the checks that apply to every
 * output (nothing raw, no broken image, no internal traceback).
 */
import * as fs from 'fs';
import * as path from 'path';
import { Locator, Page, TestInfo } from '@playwright/test';

import { expect } from './jupyterlab';

export const NOTEBOOKS = path.resolve(__dirname, '..', '..', 'notebooks');
export const NOTEBOOK = '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook';

/** The tag of the code cells a test appends to its copy of a notebook. */
export const PROBE_TAG = 'ui-test-probe';

export interface IOutputReport {
  /** Text of every output area. */
  texts: string[];
  /** Sources of images that failed to load (or have no size). */
  broken: string[];
  /** Number of images in outputs. */
  images: number;
}

/** The shipped notebooks, by file name. */
export function shippedNotebooks(): string[] {
  return fs.readdirSync(NOTEBOOKS).filter(name => name.endsWith('.ipynb')).sort();
}

function writeSettings(root: string): void {
  // Every cell in the DOM (no windowing), so that all outputs can be read.
  const settings = path.join(root, '..', 'settings', '@jupyterlab', 'notebook-extension');
  fs.mkdirSync(settings, { recursive: true });
  fs.writeFileSync(path.join(settings, 'tracker.jupyterlab-settings'), JSON.stringify({ windowingMode: 'none' }));
  // No "get notified about Jupyter news?" toast over the screenshots.
  const apputils = path.join(root, '..', 'settings', '@jupyterlab', 'apputils-extension');
  fs.mkdirSync(apputils, { recursive: true });
  fs.writeFileSync(path.join(apputils, 'notification.jupyterlab-settings'), JSON.stringify({ fetchNews: 'false' }));
}

/**
 * Copies a shipped notebook into the server's root, with `probes` appended
 * as code cells tagged PROBE_TAG, and opens it; resolves once its kernel is
 * idle.
 */
export async function openCopy(page: Page, url: string, root: string, name: string, probes: string[] = []): Promise<void> {
  const notebook = JSON.parse(fs.readFileSync(path.join(NOTEBOOKS, name), 'utf-8'));
  probes.forEach((source, i) =>
    notebook.cells.push({
      id: `ui-test-probe-${i}`,
      cell_type: 'code',
      metadata: { tags: [PROBE_TAG] },
      execution_count: null,
      outputs: [],
      source
    })
  );
  fs.writeFileSync(path.join(root, name), JSON.stringify(notebook));
  writeSettings(root);
  await page.goto(`${url}/lab/tree/${name}?reset`);
  await expect(page.locator(`${NOTEBOOK} .jp-Cell`).first()).toBeVisible();
  await expect(page.locator(`${NOTEBOOK} .jp-OutputArea-output`).first()).toBeVisible();
  await expect(page.locator('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook-ExecutionIndicator'))
    .toHaveAttribute('data-status', 'idle', { timeout: 60_000 });
}

/** The cell of the open notebook whose input contains `text`. */
export function cellWith(page: Page, text: string): Locator {
  return page.locator(`${NOTEBOOK} .jp-Cell`).filter({ has: page.locator('.jp-InputArea', { hasText: text }) });
}

export async function outputs(page: Page): Promise<IOutputReport> {
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

/** Nothing raw in the outputs, no broken image (`check` may be a soft expect). */
export function expectReadable(report: IOutputReport, check: typeof expect = expect): void {
  for (const text of report.texts) {
    check(text, 'a raw widget repr').not.toContain('children=(');
    check(text, 'a frozen progress bar').not.toMatch(/\d+%\|/);
    check(text, 'a missing value printed as None').not.toMatch(/(^|\s)None(\s|$)/);
  }
  check(report.broken, 'broken images').toEqual([]);
}

const CHAINED = ['During handling of the above exception', 'The above exception was the direct cause'];
/** A traceback frame in the workbench's own code (IPython's and Python's formats). */
const WORKBENCH_FRAME = /^\s*File\s+"?[^\n"]*[\\/]workbench[\\/][^\n"]*\.py/m;

/**
 * The outputs showing an internal traceback: a chained one, or a frame
 * inside `workbench/`; each as the start of the output's text.
 */
export function internalTracebacks(report: IOutputReport): string[] {
  return report.texts
    .filter(text => CHAINED.some(words => text.includes(words)) || WORKBENCH_FRAME.test(text))
    .map(text => text.slice(0, 400));
}

/** A screenshot of one output, kept in the test's output directory. */
export async function screenshot(locator: Locator, testInfo: TestInfo, name: string): Promise<void> {
  await locator.scrollIntoViewIfNeeded();
  await locator.screenshot({ path: testInfo.outputPath(name) });
}

/**
 * A screenshot of the whole notebook, every cell, kept as an artifact: the
 * page made as tall as the notebook's scrolled content for the picture.
 */
export async function notebookScreenshot(page: Page, testInfo: TestInfo, name: string): Promise<void> {
  const scroller = async (top: number | null) =>
    page.evaluate(
      ([selector, to]) => {
        const notebook = document.querySelector(selector as string)!;
        const node = notebook.querySelector('.jp-WindowedPanel-outer') ?? notebook;
        if (to !== null) {
          node.scrollTop = to as number;
        }
        return node.scrollHeight;
      },
      [NOTEBOOK, top]
    );
  // Two frames: Lumino lays the panels out again on the frame after a resize.
  const settle = () => page.evaluate(() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r))));
  const viewport = page.viewportSize()!;
  const height = await scroller(0);
  await page.setViewportSize({ width: viewport.width, height: Math.min(height + 200, 30_000) });
  try {
    await settle();
    await scroller(0);
    await settle();
    await page.screenshot({ path: testInfo.outputPath(name) });
  } finally {
    await page.setViewportSize(viewport);
  }
}

/**
 * Run a command from the command palette, as a user does (Ctrl+Shift+C, its
 * label, Enter). The shortcut is pressed again while the palette is not
 * there: on a busy page (a notebook starting a Dask cluster, say) a key press
 * can be lost, and the palette then never opened in 4 minutes.
 */
export async function fromPalette(page: Page, label: string): Promise<void> {
  const input = page.locator('.lm-CommandPalette-input');
  for (let attempt = 0; attempt < 4 && !(await input.isVisible()); attempt++) {
    await page.keyboard.press('Control+Shift+C');
    await input.waitFor({ state: 'visible', timeout: 10_000 }).catch(() => undefined);
  }
  await input.fill(label);
  await page.keyboard.press('Enter');
}

export async function runAll(page: Page, timeout = 180_000): Promise<void> {
  await page.locator(`${NOTEBOOK} .jp-Cell`).first().click();
  await page.keyboard.press('Escape');
  await fromPalette(page, 'Run All Cells');
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
      { timeout }
    )
    .toBe(true);
  await expect(page.locator('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook-ExecutionIndicator'))
    .toHaveAttribute('data-status', 'idle', { timeout: 60_000 });
}

/** A dashboard's Kernel tab in the open notebook's outputs. */
export interface IKernelTab {
  /** The dashboard (an ipywidgets Tab). */
  root: Locator;
  /** The input of the cell that showed it. */
  source: string;
  /** Brings the Kernel tab to the front. */
  show(): Promise<void>;
  /** The kernel drop-down's options. */
  options: Locator;
  /** The chosen option (none while the drop-down has no value). */
  selected: Locator;
  /** The tab's visible content. */
  body: Locator;
}

/** The Kernel tabs of every dashboard (a Tab widget with a "Kernel" tab). */
export async function dashboardKernelTabs(page: Page): Promise<IKernelTab[]> {
  const dashboards = page
    .locator(`${NOTEBOOK} .jp-OutputArea-output .widget-tab`)
    .filter({ has: page.locator('.lm-TabBar-tab', { hasText: /^Kernel$/ }) });
  const tabs: IKernelTab[] = [];
  for (let i = 0; i < (await dashboards.count()); i++) {
    const root = dashboards.nth(i);
    const body = root.locator('.widget-tab-contents > :visible');
    tabs.push({
      root,
      source: await root.evaluate(node =>
        (node.closest('.jp-Cell')?.querySelector('.jp-InputArea .cm-content')?.textContent ?? '').trim()
      ),
      show: () => root.locator('.lm-TabBar-tab', { hasText: /^Kernel$/ }).click(),
      options: body.locator('.widget-dropdown select option'),
      selected: body.locator('.widget-dropdown select option:checked'),
      body
    });
  }
  return tabs;
}
