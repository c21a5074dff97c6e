/**
 * Marks the lines of a cell that compile diagnostics point at, until the
 * cell is edited (any document change clears them) or the output that set
 * them goes away (it clears its own marks), shows a marked line's
 * diagnostics when the pointer rests on it, and moves the cursor to a
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
import {
  Decoration,
  DecorationSet,
  EditorView,
  hoverTooltip,
  Tooltip
} from '@codemirror/view';

import { ICompileDiagnostic, Severity } from './diagnostics';

/** One diagnostic on a marked line: what the line's hover text shows. */
export interface ILineDiagnostic {
  line: number;
  severity: Severity;
  /** The compiler's message; marks set without one show the severity only. */
  message?: string;
  column?: number | null;
}

/** Marks set by one diagnostics output (`owner`) on one editor. */
export interface IDiagnosticMarks {
  owner: string;
  lines: ILineDiagnostic[];
}

/** Sets the marks of an owner (replacing any others). */
export const setDiagnosticMarks = StateEffect.define<IDiagnosticMarks>();

/** Clears the marks if `owner` set them. */
export const clearDiagnosticMarks = StateEffect.define<string>();

interface IMarksState {
  owner: string | null;
  decorations: DecorationSet;
  /** The diagnostics of each marked line (1-based), most severe first. */
  byLine: ReadonlyMap<number, readonly ILineDiagnostic[]>;
}

const NO_MARKS: IMarksState = {
  owner: null,
  decorations: Decoration.none,
  byLine: new Map()
};

const SEVERITY_RANK: Record<Severity, number> = { error: 0, warning: 1, note: 2 };

function marksState(doc: Text, marks: IDiagnosticMarks): IMarksState {
  // Lines past the end of a shorter cell go to its last line.
  const byLine = new Map<number, ILineDiagnostic[]>();
  for (const diagnostic of marks.lines) {
    const line = Math.min(Math.max(diagnostic.line, 1), doc.lines);
    const list = byLine.get(line) ?? [];
    list.push({ ...diagnostic, line });
    byLine.set(line, list);
  }
  // One mark per line: the most severe diagnostic's (a stable sort keeps
  // the compiler's order among equals).
  for (const list of byLine.values()) {
    list.sort((a, b) => SEVERITY_RANK[a.severity] - SEVERITY_RANK[b.severity]);
  }
  const builder = new RangeSetBuilder<Decoration>();
  for (const line of [...byLine.keys()].sort((a, b) => a - b)) {
    const severity = byLine.get(line)![0].severity;
    builder.add(
      doc.line(line).from,
      doc.line(line).from,
      Decoration.line({
        class: `cm-workbench-diagnostic-line cm-workbench-${severity}-line`
      })
    );
  }
  return { owner: marks.owner, decorations: builder.finish(), byLine };
}

// Defined before the field, whose `provide` runs as it is defined.
const diagnosticHover = hoverTooltip((view, pos) => diagnosticTooltipAt(view.state, pos), {
  hideOnChange: true
});

/**
 * The state field holding the marked lines, with their hover text; install
 * it in every editor.
 */
export const diagnosticMarksField = StateField.define<IMarksState>({
  create: () => NO_MARKS,
  update(value, tr) {
    for (const effect of tr.effects) {
      if (effect.is(setDiagnosticMarks)) {
        return marksState(tr.state.doc, effect.value);
      }
      if (effect.is(clearDiagnosticMarks) && effect.value === value.owner) {
        return NO_MARKS;
      }
    }
    if (tr.docChanged && value.owner !== null) {
      return NO_MARKS;
    }
    return value;
  },
  provide: field => [
    EditorView.decorations.from(field, value => value.decorations),
    diagnosticHover
  ]
});

/** The diagnostics marked on a 1-based line, most severe first. */
export function lineDiagnostics(
  state: EditorState,
  line: number
): readonly ILineDiagnostic[] {
  return state.field(diagnosticMarksField, false)?.byLine.get(line) ?? [];
}

/** The hover text of one diagnostic: "error (col 13): message". */
export function hoverText(diagnostic: ILineDiagnostic): string {
  const where = diagnostic.column ? ` (col ${diagnostic.column})` : '';
  const message = diagnostic.message ? `: ${diagnostic.message}` : '';
  return `${diagnostic.severity}${where}${message}`;
}

/**
 * The hover tooltip of the marked line at `pos`, covering the whole line,
 * or null when that line carries no mark.
 */
export function diagnosticTooltipAt(state: EditorState, pos: number): Tooltip | null {
  const line = state.doc.lineAt(pos);
  const diagnostics = lineDiagnostics(state, line.number);
  if (diagnostics.length === 0) {
    return null;
  }
  return {
    pos: line.from,
    end: line.to,
    above: true,
    create: view => {
      const dom = view.dom.ownerDocument.createElement('div');
      dom.className = 'cm-workbench-diagnostic-tooltip';
      for (const diagnostic of diagnostics) {
        const item = dom.ownerDocument.createElement('div');
        item.className = `cm-workbench-diagnostic-tooltip-item cm-workbench-${diagnostic.severity}`;
        item.textContent = hoverText(diagnostic);
        dom.appendChild(item);
      }
      return { dom };
    }
  };
}


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
      .map(d => ({
        line: d.line!,
        severity: d.severity,
        message: d.message,
        column: d.column
      }))
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
