import { language } from '@codemirror/language';
import { python, pythonLanguage } from '@codemirror/lang-python';
import { EditorState } from '@codemirror/state';

import { cudaCellLanguage } from '../cell-language';
import { cudaLanguage } from '../cuda-language';

/** A state like a notebook cell's: Python, plus the %%cuda switch. */
function cell(doc: string, isPython = () => true): EditorState {
  return EditorState.create({
    doc,
    extensions: [python(), cudaCellLanguage({ isPython, initialSource: doc })]
  });
}

function replaceAll(state: EditorState, text: string): EditorState {
  return state.update({
    changes: { from: 0, to: state.doc.length, insert: text }
  }).state;
}

describe('cudaCellLanguage', () => {
  it('starts as CUDA when the initial source is a %%cuda cell', () => {
    expect(cell('%%cuda\n__global__ void k() {}').facet(language)).toBe(cudaLanguage);
  });

  it('starts as Python otherwise', () => {
    expect(cell('x = 1').facet(language)).toBe(pythonLanguage);
  });

  it('switches live as the magic line is typed and removed', () => {
    let state = cell('__global__ void k() {}');
    expect(state.facet(language)).toBe(pythonLanguage);

    state = state.update({ changes: { from: 0, insert: '%%cuda\n' } }).state;
    expect(state.facet(language)).toBe(cudaLanguage);

    // Typing after the magic name makes it another magic.
    state = state.update({ changes: { from: 6, insert: 'x' } }).state;
    expect(state.facet(language)).toBe(pythonLanguage);
    state = state.update({ changes: { from: 6, to: 7 } }).state;
    expect(state.facet(language)).toBe(cudaLanguage);

    state = state.update({ changes: { from: 0, to: 7 } }).state;
    expect(state.doc.toString()).toBe('__global__ void k() {}');
    expect(state.facet(language)).toBe(pythonLanguage);
  });

  it('follows a source replaced in one transaction', () => {
    let state = cell('print(1)');
    state = replaceAll(state, '%%cuda -n k\nint x;');
    expect(state.facet(language)).toBe(cudaLanguage);
    state = replaceAll(state, 'print(2)');
    expect(state.facet(language)).toBe(pythonLanguage);
  });

  it('does nothing in editors that do not hold Python', () => {
    let isPython = false;
    let state = cell('%%cuda\nint x;', () => isPython);
    expect(state.facet(language)).toBe(pythonLanguage);
    // The language changing (e.g. a new kernel) is picked up on the next
    // transaction.
    isPython = true;
    state = state.update({}).state;
    expect(state.facet(language)).toBe(cudaLanguage);
  });
});
