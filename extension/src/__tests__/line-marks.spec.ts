import { EditorState, Text } from '@codemirror/state';
import { EditorView } from '@codemirror/view';

import { parseDiagnostics } from '../diagnostics';
import {
  clearDiagnosticMarks,
  diagnosticMarksField,
  diagnosticTooltipAt,
  hoverText,
  lineDiagnostics,
  markedLines,
  marksFor,
  moveCursorTo,
  offsetOf,
  setDiagnosticMarks
} from '../line-marks';

const CELL = ['%%cuda', '__global__ void k(float* y) {', '  y[0] = x;', '  int unused;', '}'].join('\n');

const REPORT = parseDiagnostics({
  compiler: 'NVRTC',
  diagnostics: [
    { severity: 'error', line: 3, column: 10, message: 'identifier "x" is undefined' },
    { severity: 'warning', line: 4, column: 7, message: 'variable "unused" was declared but never referenced' },
    { severity: 'note', line: 3, column: null, message: 'a note on the error line' },
    { severity: 'note', line: null, column: null, message: 'no line' }
  ],
  cell_id: null
});

function marked(owner = 'output-1'): EditorState {
  const state = EditorState.create({ doc: CELL, extensions: [diagnosticMarksField] });
  return state.update({ effects: setDiagnosticMarks.of(marksFor(owner, REPORT.diagnostics)) }).state;
}

describe('diagnostic line marks', () => {
  it('marks each line once, with its most severe diagnostic', () => {
    expect(markedLines(marked())).toEqual([
      { line: 3, severity: 'error' },
      { line: 4, severity: 'warning' }
    ]);
  });

  it('start empty', () => {
    const state = EditorState.create({ doc: CELL, extensions: [diagnosticMarksField] });
    expect(markedLines(state)).toEqual([]);
  });

  it('are cleared by any edit of the cell', () => {
    const state = marked().update({ changes: { from: 0, insert: ' ' } }).state;
    expect(markedLines(state)).toEqual([]);
  });

  it('survive cursor moves', () => {
    const state = marked().update({ selection: { anchor: 5 } }).state;
    expect(markedLines(state)).toHaveLength(2);
  });

  it('are cleared by their owner only', () => {
    let state = marked('output-1');
    state = state.update({ effects: clearDiagnosticMarks.of('output-0') }).state;
    expect(markedLines(state)).toHaveLength(2);
    state = state.update({ effects: clearDiagnosticMarks.of('output-1') }).state;
    expect(markedLines(state)).toEqual([]);
  });

  it('are replaced by a newer output', () => {
    let state = marked('output-1');
    const newer = parseDiagnostics({ diagnostics: [{ severity: 'error', line: 2, message: 'm' }] });
    state = state.update({ effects: setDiagnosticMarks.of(marksFor('output-2', newer.diagnostics)) }).state;
    state = state.update({ effects: clearDiagnosticMarks.of('output-1') }).state;
    expect(markedLines(state)).toEqual([{ line: 2, severity: 'error' }]);
  });

  it('clamp lines past the end of a shorter cell to its last line', () => {
    const state = EditorState.create({ doc: 'a\nb', extensions: [diagnosticMarksField] });
    const next = state.update({
      effects: setDiagnosticMarks.of({ owner: 'o', lines: [{ line: 9, severity: 'error' }] })
    }).state;
    expect(markedLines(next)).toEqual([{ line: 2, severity: 'error' }]);
  });
});

describe('offsetOf', () => {
  const doc = Text.of(CELL.split('\n'));

  it('is the offset of a 1-based line and column', () => {
    expect(CELL.slice(offsetOf(doc, 3, 10))).toMatch(/^x;/);
    expect(CELL.slice(offsetOf(doc, 1, 1))).toMatch(/^%%cuda/);
  });

  it('is the start of the line without a column', () => {
    expect(CELL.slice(offsetOf(doc, 4, null))).toMatch(/^ {2}int unused/);
  });

  it('clamps to the line and the document', () => {
    expect(offsetOf(doc, 3, 500)).toBe(doc.line(3).to);
    expect(offsetOf(doc, 99, 1)).toBe(doc.line(5).from);
    expect(offsetOf(doc, 0, 0)).toBe(0);
  });
});

describe('moveCursorTo', () => {
  it('puts the cursor of a view on the diagnostic', () => {
    const parent = document.createElement('div');
    document.body.appendChild(parent);
    const view = new EditorView({ doc: CELL, parent });
    moveCursorTo(view, 3, 10);
    const head = view.state.selection.main.head;
    expect(view.state.doc.lineAt(head).number).toBe(3);
    expect(head - view.state.doc.line(3).from).toBe(9);
    expect(view.state.selection.main.empty).toBe(true);
    view.destroy();
  });
});

describe('the hover text of marked lines', () => {
  it('gives each marked line its diagnostics, most severe first, with their messages', () => {
    const state = marked();
    expect(lineDiagnostics(state, 3).map(hoverText)).toEqual([
      'error (col 10): identifier "x" is undefined',
      'note: a note on the error line'
    ]);
    expect(lineDiagnostics(state, 4).map(hoverText)).toEqual([
      'warning (col 7): variable "unused" was declared but never referenced'
    ]);
    expect(lineDiagnostics(state, 2)).toEqual([]);
  });

  it('covers the whole marked line, and nothing on unmarked lines', () => {
    const state = marked();
    const line3 = state.doc.line(3);
    for (const pos of [line3.from, line3.from + 4, line3.to]) {
      const tooltip = diagnosticTooltipAt(state, pos)!;
      expect(tooltip).not.toBeNull();
      expect([tooltip.pos, tooltip.end]).toEqual([line3.from, line3.to]);
    }
    for (const line of [1, 2, 5]) {
      expect(diagnosticTooltipAt(state, state.doc.line(line).from)).toBeNull();
    }
  });

  it('goes with the marks: edits and the owner clearing them remove it', () => {
    const pos = marked().doc.line(3).from + 2;
    expect(diagnosticTooltipAt(marked(), pos)).not.toBeNull();
    const edited = marked().update({ changes: { from: 0, insert: ' ' } }).state;
    expect(diagnosticTooltipAt(edited, pos)).toBeNull();
    const cleared = marked('output-1').update({ effects: clearDiagnosticMarks.of('output-1') }).state;
    expect(diagnosticTooltipAt(cleared, pos)).toBeNull();
  });

  it('follows a line clamped to the end of a shorter cell', () => {
    const state = EditorState.create({ doc: 'a\nb', extensions: [diagnosticMarksField] }).update({
      effects: setDiagnosticMarks.of({ owner: 'o', lines: [{ line: 9, severity: 'error', message: 'past the end' }] })
    }).state;
    expect(lineDiagnostics(state, 2).map(hoverText)).toEqual(['error: past the end']);
  });

  it('draws one item per diagnostic, classed by severity', () => {
    const parent = document.createElement('div');
    document.body.appendChild(parent);
    const view = new EditorView({ state: marked(), parent });
    const tooltip = diagnosticTooltipAt(view.state, view.state.doc.line(4).from)!;
    const { dom } = tooltip.create(view);
    expect(dom.className).toBe('cm-workbench-diagnostic-tooltip');
    expect(Array.from(dom.children).map(c => [c.className, c.textContent])).toEqual([
      [
        'cm-workbench-diagnostic-tooltip-item cm-workbench-warning',
        'warning (col 7): variable "unused" was declared but never referenced'
      ]
    ]);
    view.destroy();
  });
});
