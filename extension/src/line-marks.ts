/**
 * Marks the lines of a cell that compile diagnostics point at, until the
 * cell is edited (any document change clears them) or the output that set
 * them goes away (it clears its own marks), and moves the cursor to a
 * diagnostic's position.
 */
import {
  EditorSelection,
  EditorState,
  RangeSetBuilder,
  StateEffect,
  StateField,
  Text
} from '@codemirror/state';
import { Decoration, DecorationSet, EditorView } from '@codemirror/view';

import { ICompileDiagnostic, Severity } from './diagnostics';

/** Marks set by one diagnostics output (`owner`) on one editor. */
export interface IDiagnosticMarks {
  owner: string;
  lines: { line: number; severity: Severity }[];
}

/** Sets the marks of an owner (replacing any others). */
export const setDiagnosticMarks = StateEffect.define<IDiagnosticMarks>();

/** Clears the marks if `owner` set them. */
export const clearDiagnosticMarks = StateEffect.define<string>();

interface IMarksState {
  owner: string | null;
  decorations: DecorationSet;
}

const SEVERITY_RANK: Record<Severity, number> = { error: 0, warning: 1, note: 2 };

function lineDecorations(doc: Text, marks: IDiagnosticMarks): DecorationSet {
  // One mark per line, the most severe one wins.
  const worst = new Map<number, Severity>();
  for (const { line, severity } of marks.lines) {
    const clamped = Math.min(Math.max(line, 1), doc.lines);
    const current = worst.get(clamped);
    if (!current || SEVERITY_RANK[severity] < SEVERITY_RANK[current]) {
      worst.set(clamped, severity);
    }
  }
  const builder = new RangeSetBuilder<Decoration>();
  for (const line of [...worst.keys()].sort((a, b) => a - b)) {
    const severity = worst.get(line)!;
    builder.add(
      doc.line(line).from,
      doc.line(line).from,
      Decoration.line({
        class: `cm-workbench-diagnostic-line cm-workbench-${severity}-line`
      })
    );
  }
  return builder.finish();
}

/** The state field holding the marked lines; install it in every editor. */
export const diagnosticMarksField = StateField.define<IMarksState>({
  create: () => ({ owner: null, decorations: Decoration.none }),
  update(value, tr) {
    for (const effect of tr.effects) {
      if (effect.is(setDiagnosticMarks)) {
        return {
          owner: effect.value.owner,
          decorations: lineDecorations(tr.state.doc, effect.value)
        };
      }
      if (effect.is(clearDiagnosticMarks) && effect.value === value.owner) {
        return { owner: null, decorations: Decoration.none };
      }
    }
    if (tr.docChanged && value.owner !== null) {
      return { owner: null, decorations: Decoration.none };
    }
    return value;
  },
  provide: field =>
    EditorView.decorations.from(field, value => value.decorations)
});

/** The 1-based lines currently marked in a state, with their severity. */
export function markedLines(
  state: EditorState
): { line: number; severity: Severity }[] {
  const result: { line: number; severity: Severity }[] = [];
  const { decorations } = state.field(diagnosticMarksField);
  decorations.between(0, state.doc.length, (from, _to, decoration) => {
    const cls = String(decoration.spec.class ?? '');
    const severity = (['error', 'warning', 'note'] as Severity[]).find(s =>
      cls.includes(`cm-workbench-${s}-line`)
    )!;
    result.push({ line: state.doc.lineAt(from).number, severity });
  });
  return result;
}

/** The marks for a list of diagnostics (those without a line are skipped). */
export function marksFor(
  owner: string,
  diagnostics: readonly ICompileDiagnostic[]
): IDiagnosticMarks {
  return {
    owner,
    lines: diagnostics
      .filter(d => d.line !== null)
      .map(d => ({ line: d.line!, severity: d.severity }))
  };
}

/**
 * The document offset of a 1-based line and column, clamped to the document
 * (the cell may have changed since it was compiled). A null column is the
 * start of the line.
 */
export function offsetOf(doc: Text, line: number, column: number | null): number {
  const target = doc.line(Math.min(Math.max(line, 1), doc.lines));
  const col = column === null ? 1 : Math.max(column, 1);
  return Math.min(target.from + col - 1, target.to);
}

/** Puts the cursor of `view` at a diagnostic's position and scrolls to it. */
export function moveCursorTo(
  view: EditorView,
  line: number,
  column: number | null
): void {
  const pos = offsetOf(view.state.doc, line, column);
  view.dispatch({
    selection: EditorSelection.cursor(pos),
    scrollIntoView: true
  });
}
