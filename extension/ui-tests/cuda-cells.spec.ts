/**
 * cuda-workbench's extension in a real JupyterLab and a real browser:
 * `%%cuda` highlighting (and switching back live), C++ types and keywords
 * drawn in colour as in a `.cu` file, compile diagnostics from a real
 * `%%cuda` compile error (the simulator without a GPU) that jump to their
 * line when clicked, line marks with the diagnostic as hover text, and the
 * status-bar item.
 */
import * as fs from 'fs';
import * as path from 'path';
import { Locator, Page } from '@playwright/test';

import { expect, test } from './jupyterlab';
import { fromPalette } from './notebooks';

const SAXPY = [
  '%%cuda -n saxpy',
  '__global__ void saxpy(int n, float a, const float* __restrict__ x, float* y) {',
  '    int i = blockIdx.x * blockDim.x + threadIdx.x;',
  '    if (i < n) y[i] = a * x[i] + y[i];',
  '    __syncthreads();',
  '}'
];

/** A templated kernel: C++'s types and keywords, as a newcomer writes them. */
const TEMPLATED = [
  '%%cuda -n scale',
  'template <typename T>',
  '__global__ void scale(const T* __restrict__ x, T* y, unsigned int n, float a) {',
  '    __shared__ float tile[32];',
  '    size_t i = blockIdx.x * blockDim.x + threadIdx.x;',
  '    double d = 0.5; bool ok = true;',
  '    if (i < n) y[i] = a * x[i];',
  '}'
];

/** A compile error on line 4 of the cell (the %%cuda line is line 1). */
const BROKEN = [
  '%%cuda -n broken',
  '__global__ void broken(float* y) {',
  '    int i = threadIdx.x;',
  '    y[i] = undefined_value;',
  '}'
];

function notebook(cells: string[][]): string {
  return JSON.stringify({
    nbformat: 4,
    nbformat_minor: 5,
    metadata: {
      kernelspec: { name: 'python3', display_name: 'Python 3', language: 'python' },
      language_info: { name: 'python', codemirror_mode: { name: 'ipython', version: 3 } }
    },
    cells: cells.map((lines, i) => ({
      id: `cell-${i}`,
      cell_type: 'code',
      metadata: {},
      execution_count: null,
      outputs: [],
      source: lines.join('\n')
    }))
  });
}

function cell(page: Page, index: number): Locator {
  return page.locator('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell').nth(index);
}

/** The editor line of `cellLocator` whose text is exactly `text`. */
function line(cellLocator: Locator, text: string): Locator {
  return cellLocator.locator('.cm-line').filter({ hasText: new RegExp(`^${escape(text)}$`) });
}

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** The token span in a cell's editor with this exact text. */
function token(cellLocator: Locator, text: string): Locator {
  return cellLocator.locator('.cm-content span').filter({ hasText: new RegExp(`^${escape(text)}$`) }).first();
}

interface ISessionModel {
  path: string;
  kernel: { connections: number; execution_state: string } | null;
}

async function openNotebook(page: Page, url: string, name: string): Promise<void> {
  // ?reset: start from an empty workspace, not the tabs of the previous test.
  await page.goto(`${url}/lab/tree/${name}?reset`);
  await expect(cell(page, 0).locator('.cm-content')).toBeVisible();
  // The notebook can run cells once the page holds a connection to its
  // kernel and the kernel is idle (the toolbar says idle a little earlier).
  await expect
    .poll(
      async () => {
        const sessions = (await (await fetch(`${url}/api/sessions`)).json()) as ISessionModel[];
        const kernel = sessions.find(s => s.path === name)?.kernel;
        return !!kernel && kernel.connections > 0 && kernel.execution_state === 'idle';
      },
      { timeout: 60_000 }
    )
    .toBe(true);
  await expect(
    page.locator('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook-ExecutionIndicator')
  ).toHaveAttribute('data-status', 'idle');
}

test('a %%cuda cell is highlighted as CUDA C++, and as Python once the magic goes', async ({ page, lab }) => {
  fs.writeFileSync(path.join(lab.root, 'highlight.ipynb'), notebook([['x = 1  # plain Python'], SAXPY]));
  await openNotebook(page, lab.url, 'highlight.ipynb');

  const cuda = cell(page, 1);
  await expect(cuda.locator('.cm-editor')).toHaveClass(/cm-workbench-cuda/);
  // C++ tokens (CodeMirror's C++ parser, tok-* classes from classHighlighter).
  await expect(token(cuda, 'void')).toHaveClass(/tok-typeName/);
  await expect(token(cuda, 'if')).toHaveClass(/tok-keyword/);
  await expect(token(cuda, 'int').first()).toHaveClass(/tok-typeName/);
  // CUDA's own words.
  await expect(token(cuda, '%%cuda -n saxpy')).toHaveClass(/cm-cuda-magic/);
  await expect(token(cuda, '__global__')).toHaveClass(/cm-cuda-qualifier/);
  await expect(token(cuda, '__global__')).toHaveClass(/tok-keyword/);
  await expect(token(cuda, '__restrict__')).toHaveClass(/cm-cuda-qualifier/);
  await expect(token(cuda, 'threadIdx')).toHaveClass(/cm-cuda-builtin/);
  await expect(token(cuda, 'blockIdx')).toHaveClass(/cm-cuda-builtin/);
  await expect(token(cuda, '__syncthreads')).toHaveClass(/cm-cuda-intrinsic/);

  // The Python cell keeps JupyterLab's Python highlighting.
  const plain = cell(page, 0);
  await expect(plain.locator('.cm-editor')).not.toHaveClass(/cm-workbench-cuda/);
  await expect(plain.locator('.tok-comment')).toHaveCount(0);

  // Deleting the magic line turns the cell back into Python, live...
  await cuda.locator('.cm-content').click();
  await page.keyboard.press('Control+Home');
  await page.keyboard.press('Shift+End');
  await page.keyboard.press('Backspace');
  await expect(line(cuda, '__global__ void saxpy(int n, float a, const float* __restrict__ x, float* y) {')).toBeVisible();
  await expect(cuda.locator('.cm-editor')).not.toHaveClass(/cm-workbench-cuda/);
  await expect(cuda.locator('[class*="tok-"]')).toHaveCount(0);
  await expect(cuda.locator('.cm-cuda-builtin')).toHaveCount(0);

  // ...and typing it back makes it CUDA again.
  await page.keyboard.type('%%cuda -n saxpy');
  await expect(cuda.locator('.cm-editor')).toHaveClass(/cm-workbench-cuda/);
  await expect(token(cuda, 'void')).toHaveClass(/tok-typeName/);
  await expect(token(cuda, 'threadIdx')).toHaveClass(/cm-cuda-builtin/);
});

/** The colours the editor draws some words of `editor` in, and its text colour. */
async function wordColours(editor: Locator, words: string[]): Promise<{ text: string; words: Record<string, string> }> {
  return editor.evaluate((root, wanted) => {
    const content = root.querySelector('.cm-content')!;
    const words: Record<string, string> = {};
    for (const span of Array.from(content.querySelectorAll('span'))) {
      const text = span.textContent ?? '';
      if (wanted.includes(text) && !(text in words) && span.children.length === 0) {
        words[text] = getComputedStyle(span).color;
      }
    }
    return { text: getComputedStyle(content).color, words };
  }, words);
}

/** The colour a theme variable resolves to in the page. */
async function themeColour(page: Page, variable: string): Promise<string> {
  return page.evaluate(name => {
    const probe = document.createElement('span');
    probe.style.color = `var(${name})`;
    document.body.appendChild(probe);
    const colour = getComputedStyle(probe).color;
    probe.remove();
    return colour;
  }, variable);
}

test('C++ types and keywords in a %%cuda cell are coloured as in a .cu file', async ({ page, lab }, testInfo) => {
  fs.writeFileSync(path.join(lab.root, 'types.ipynb'), notebook([TEMPLATED]));
  fs.writeFileSync(path.join(lab.root, 'scale.cu'), TEMPLATED.slice(1).join('\n'));
  await openNotebook(page, lab.url, 'types.ipynb');

  const editor = cell(page, 0).locator('.cm-editor');
  await expect(editor).toHaveClass(/cm-workbench-cuda/);
  await expect(token(cell(page, 0), 'size_t')).toHaveClass(/tok-typeName/);
  const types = ['void', 'int', 'float', 'unsigned', 'double', 'bool', 'size_t', 'T'];
  const keywords = ['template', 'typename', 'const', 'if', '__global__', '__shared__', '__restrict__'];
  const inCell = await wordColours(editor, [...types, ...keywords, 'a']);
  const typeColour = await themeColour(page, '--jp-mirror-editor-variable-3-color');
  const keywordColour = await themeColour(page, '--jp-mirror-editor-keyword-color');
  expect(typeColour).not.toBe(inCell.text);
  for (const word of types) {
    expect([word, inCell.words[word]]).toEqual([word, typeColour]);
  }
  for (const word of keywords) {
    expect([word, inCell.words[word]]).toEqual([word, keywordColour]);
  }
  expect(inCell.words.a).toBe(inCell.text);
  await editor.screenshot({ path: testInfo.outputPath('cuda-cell-colours.png') });

  // The same source in a .cu file: the same colours, word for word.
  await page.goto(`${lab.url}/lab/tree/scale.cu?reset`);
  const fileEditor = page.locator('.jp-FileEditor .cm-editor');
  await expect(fileEditor).toHaveClass(/cm-workbench-cuda/);
  await expect(token(page.locator('.jp-FileEditor'), 'size_t')).toHaveClass(/tok-typeName/);
  const inFile = await wordColours(fileEditor, [...types, ...keywords, 'a']);
  expect(inFile).toEqual(inCell);
  await fileEditor.screenshot({ path: testInfo.outputPath('cu-file-colours.png') });
});

test('a compile error lists its diagnostics, marks the line and jumps to it', async ({ page, lab }, testInfo) => {
  fs.writeFileSync(
    path.join(lab.root, 'diagnostics.ipynb'),
    notebook([['%load_ext workbench'], BROKEN, ['print("after")']])
  );
  await openNotebook(page, lab.url, 'diagnostics.ipynb');
  const status = page.locator('.jp-WorkbenchStatus');
  await expect(status).toBeHidden();

  // Run the first two cells.
  await cell(page, 0).locator('.jp-InputPrompt').click();
  await page.keyboard.press('Shift+Enter');
  await expect(cell(page, 0).locator('.jp-InputPrompt')).toHaveText(/\[1\]/);
  await page.keyboard.press('Shift+Enter');

  const broken = cell(page, 1);
  const list = broken.locator('.jp-WorkbenchDiagnostics');
  await expect(list).toBeVisible();
  await expect(list.locator('.jp-WorkbenchDiagnostics-summary')).toHaveText('NVRTC: 1 error');
  const error = list.locator('.jp-WorkbenchDiagnostics-item.jp-mod-error').first();
  await expect(error.locator('.jp-WorkbenchDiagnostics-severity')).toHaveText('error');
  await expect(error.locator('.jp-WorkbenchDiagnostics-location')).toHaveText(/^line 4(:\d+)?$/);
  await expect(error.locator('.jp-WorkbenchDiagnostics-message')).toContainText('undefined_value');

  // The error line is marked in the editor.
  const errorLine = line(broken, '    y[i] = undefined_value;');
  await expect(errorLine).toHaveClass(/cm-workbench-error-line/);
  await expect(broken.locator('.cm-workbench-diagnostic-line')).toHaveCount(1);

  // Resting the pointer on the marked line shows its diagnostic; on another
  // line, nothing.
  const hover = page.locator('.cm-tooltip-hover .cm-workbench-diagnostic-tooltip');
  await errorLine.locator('span', { hasText: /^undefined_value$/ }).hover();
  await expect(hover).toBeVisible();
  const message = (await error.locator('.jp-WorkbenchDiagnostics-message').textContent())!;
  await expect(hover.locator('.cm-workbench-diagnostic-tooltip-item')).toHaveText([
    `error (col ${await error.getAttribute('data-column')}): ${message}`
  ]);
  await expect(hover.locator('.cm-workbench-error')).toHaveCount(1);
  await page.screenshot({ path: testInfo.outputPath('diagnostic-hover.png') });
  await line(broken, '    int i = threadIdx.x;').locator('span', { hasText: /^int$/ }).hover();
  await expect(hover).toHaveCount(0);

  // Put the cursor elsewhere, then click the diagnostic: it moves to line 4.
  await line(broken, '__global__ void broken(float* y) {').click();
  await page.keyboard.press('Escape');
  await error.click();
  const column = Number((await error.getAttribute('data-column')) ?? '1');
  const caret = await page.evaluate(() => {
    const selection = document.getSelection()!;
    const node = selection.focusNode!;
    const element = (node.nodeType === Node.ELEMENT_NODE ? node : node.parentElement) as Element;
    const lineElement = element.closest('.cm-line')!;
    const range = document.createRange();
    range.setStart(lineElement, 0);
    range.setEnd(node, selection.focusOffset);
    return {
      line: lineElement.textContent,
      column: range.toString().length + 1,
      inEditor: !!document.activeElement?.closest('.cm-editor'),
      cellIndex: Array.from(document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell')).indexOf(
        lineElement.closest('.jp-Cell')!
      )
    };
  });
  expect(caret).toEqual({ line: '    y[i] = undefined_value;', column, inEditor: true, cellIndex: 1 });
  await expect(broken).toHaveClass(/jp-mod-active/);

  // The status bar shows the simulator backend after the cells ran.
  await expect(status).toHaveText(/^simulator/);

  // Editing the cell clears the marks.
  await page.keyboard.type(' ');
  await expect(broken.locator('.cm-workbench-diagnostic-line')).toHaveCount(0);

  // Re-running it marks the line again: the new output's marks survive the
  // disposal of the old output.
  await page.keyboard.press('Control+Enter');
  await expect(broken.locator('.jp-InputPrompt')).toHaveText(/\[3\]/);
  await expect(list.locator('.jp-WorkbenchDiagnostics-location')).toHaveText(/^line 4:13$/);
  await expect(errorLine).toHaveCount(0);
  await expect(line(broken, '    y[i] =  undefined_value;')).toHaveClass(/cm-workbench-error-line/);

  // Clearing the output clears the marks.
  await page.keyboard.press('Escape');
  await fromPalette(page, 'Clear Cell Output');
  await expect(list).toHaveCount(0);
  await expect(broken.locator('.cm-workbench-diagnostic-line')).toHaveCount(0);
});
