import { EditorState, Text } from '@codemirror/state';
import { EditorView } from '@codemirror/view';

import { parseDiagnostics } from '../diagnostics';
import {
  clearDiagnosticMarks,
  diagnosticMarksField,
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
