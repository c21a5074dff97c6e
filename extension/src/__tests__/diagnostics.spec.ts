import {
  DIAGNOSTICS_MIME_TYPE,
  ICompileDiagnostic,
  locationText,
  parseDiagnostics,
  renderDiagnostics,
  summarize
} from '../diagnostics';

/** The payload as the kernel publishes it (see the Python side). */
const PAYLOAD = {
  compiler: 'NVRTC',
  diagnostics: [
    { severity: 'error', line: 3, column: 12, message: 'identifier "x" is undefined' },
    { severity: 'warning', line: 5, column: null, message: 'variable "y" was declared but never referenced' },
    { severity: 'note', line: null, column: null, message: '1 error detected in the compilation of "cell.cu".' }
  ],
  cell_id: null
};

describe('DIAGNOSTICS_MIME_TYPE', () => {
  it('is the type the kernel publishes', () => {
    expect(DIAGNOSTICS_MIME_TYPE).toBe('application/vnd.cuda-workbench.diagnostics+json');
  });
});

describe('parseDiagnostics', () => {
  it('reads the payload', () => {
    expect(parseDiagnostics(PAYLOAD)).toEqual({
      compiler: 'NVRTC',
      cellId: null,
      diagnostics: [
        { severity: 'error', line: 3, column: 12, message: 'identifier "x" is undefined' },
        { severity: 'warning', line: 5, column: null, message: 'variable "y" was declared but never referenced' },
        { severity: 'note', line: null, column: null, message: '1 error detected in the compilation of "cell.cu".' }
      ]
    });
  });

  it('keeps a cell id', () => {
    expect(parseDiagnostics({ ...PAYLOAD, cell_id: 'abc-123' }).cellId).toBe('abc-123');
  });

  it('reads unknown severities as errors and bad positions as null', () => {
    const report = parseDiagnostics({
      compiler: 'NVRTC',
      diagnostics: [
        { severity: 'FATAL', line: 0, column: -1, message: 'a' },
        { severity: 'Warning', line: 2.5, column: '3', message: 'b' },
        { line: 7, message: 'c' }
      ]
    });
    expect(report.diagnostics).toEqual([
      { severity: 'error', line: null, column: null, message: 'a' },
      { severity: 'warning', line: null, column: null, message: 'b' },
      { severity: 'error', line: 7, column: null, message: 'c' }
    ]);
  });

  it.each([
    [null, 'not a JSON object'],
    [[], 'not a JSON object'],
    ['text', 'not a JSON object'],
    [{ compiler: 'NVRTC' }, 'no "diagnostics" array'],
    [{ diagnostics: {} }, 'no "diagnostics" array'],
    [{ diagnostics: [{ severity: 'error', line: 1 }] }, 'diagnostic 0 has no "message"'],
    [{ diagnostics: [{ message: 'ok' }, 42] }, 'diagnostic 1 has no "message"']
  ])('rejects %j saying what is wrong', (payload, problem) => {
    expect(() => parseDiagnostics(payload)).toThrow(problem);
  });
});

describe('summaries', () => {
  it('counts messages per severity', () => {
    expect(summarize(parseDiagnostics(PAYLOAD))).toBe('NVRTC: 1 error, 1 warning, 1 note');
    expect(
      summarize(parseDiagnostics({ compiler: 'NVRTC', diagnostics: [PAYLOAD.diagnostics[0], PAYLOAD.diagnostics[0]] }))
    ).toBe('NVRTC: 2 errors');
    expect(summarize(parseDiagnostics({ compiler: 'NVRTC', diagnostics: [] }))).toBe('NVRTC: no messages');
  });

  it('writes locations', () => {
    const [error, warning, note] = parseDiagnostics(PAYLOAD).diagnostics;
    expect(locationText(error)).toBe('line 3:12');
    expect(locationText(warning)).toBe('line 5');
    expect(locationText(note)).toBe('');
  });
});

describe('renderDiagnostics', () => {
  function render() {
    const selected: ICompileDiagnostic[] = [];
    const report = parseDiagnostics(PAYLOAD);
    const node = renderDiagnostics(report, d => selected.push(d));
    document.body.replaceChildren(node);
    const items = Array.from(node.querySelectorAll('li'));
    return { report, node, items, selected };
  }

  it('shows a summary and one item per diagnostic with severity, line and message', () => {
    const { node, items } = render();
    expect(node.querySelector('.jp-WorkbenchDiagnostics-summary')!.textContent).toBe(
      'NVRTC: 1 error, 1 warning, 1 note'
    );
    const cells = items.map(item =>
      Array.from(item.querySelectorAll('span')).map(span => span.textContent)
    );
    expect(cells).toEqual([
      ['error', 'line 3:12', 'identifier "x" is undefined'],
      ['warning', 'line 5', 'variable "y" was declared but never referenced'],
      ['note', '', '1 error detected in the compilation of "cell.cu".']
    ]);
    expect(items.map(i => i.className)).toEqual([
      'jp-WorkbenchDiagnostics-item jp-mod-error jp-mod-clickable',
      'jp-WorkbenchDiagnostics-item jp-mod-warning jp-mod-clickable',
      'jp-WorkbenchDiagnostics-item jp-mod-note'
    ]);
  });

  it('calls back with the diagnostic of a clicked item', () => {
    const { report, items, selected } = render();
    items[1].click();
    items[0].click();
    expect(selected).toEqual([report.diagnostics[1], report.diagnostics[0]]);
  });

  it('makes items with a line keyboard buttons', () => {
    const { report, items, selected } = render();
    expect(items[0].getAttribute('role')).toBe('button');
    expect(items[0].tabIndex).toBe(0);
    items[0].dispatchEvent(new KeyboardEvent('keydown', { key: 'Enter', bubbles: true }));
    items[0].dispatchEvent(new KeyboardEvent('keydown', { key: 'a', bubbles: true }));
    expect(selected).toEqual([report.diagnostics[0]]);
  });

  it('leaves items without a line inert', () => {
    const { items, selected } = render();
    items[2].click();
    expect(selected).toEqual([]);
    expect(items[2].hasAttribute('role')).toBe(false);
  });

  it('shows messages as text, never as HTML', () => {
    const node = renderDiagnostics(
      parseDiagnostics({ compiler: 'NVRTC', diagnostics: [{ severity: 'error', line: 1, message: '<img src=x onerror=alert(1)>' }] }),
      () => undefined
    );
    expect(node.querySelector('img')).toBeNull();
    expect(node.querySelector('.jp-WorkbenchDiagnostics-message')!.textContent).toBe('<img src=x onerror=alert(1)>');
  });
});
