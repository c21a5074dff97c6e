/**
 * The output renderer of the diagnostics MIME type: the list of messages,
 * clickable to jump to their line, and line marks in the owning cell's
 * editor for as long as this output exists (and the cell is not edited).
 */
import { EditorView } from '@codemirror/view';
import { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { Widget } from '@lumino/widgets';

import {
  DIAGNOSTICS_MIME_TYPE,
  ICompileDiagnostic,
  IDiagnosticsReport,
  parseDiagnostics,
  renderDiagnostics
} from './diagnostics';
import {
  clearDiagnosticMarks,
  marksFor,
  moveCursorTo,
  setDiagnosticMarks
} from './line-marks';

/** The editor of the cell an output belongs to. */
export interface ICellEditorHandle {
  view: EditorView;
  /** Makes the cell the active one, in edit mode, and scrolls to it. */
  activate(): void;
}

/** Finds the editor of the cell that holds `outputNode` (or the report's cell). */
export type CellEditorLocator = (
  outputNode: HTMLElement,
  report: IDiagnosticsReport
) => ICellEditorHandle | null;

let ownerCount = 0;

export class DiagnosticsRenderer
  extends Widget
  implements IRenderMime.IRenderer
{
  constructor(
    options: IRenderMime.IRendererOptions,
    private readonly locate: CellEditorLocator
  ) {
    super();
    this.addClass('jp-WorkbenchDiagnosticsOutput');
    this._mimeType = options.mimeType;
  }

  async renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    try {
      this._report = parseDiagnostics(model.data[this._mimeType]);
    } catch (error) {
      this._report = null;
      this.node.textContent = `cuda-workbench: cannot show these diagnostics (${
        (error as Error).message
      })`;
      return;
    }
    this.node.replaceChildren(
      renderDiagnostics(this._report, d => this._select(d))
    );
    if (this.isAttached) {
      this._mark();
    }
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this._clearMarks();
    super.dispose();
  }

  protected onAfterAttach(): void {
    // Marked once per render: a cell scrolled out of a windowed notebook and
    // back must not get its marks again after it was edited.
    if (!this._markedView) {
      this._mark();
    }
  }

  private _mark(): void {
    this._clearMarks();
    const handle = this._report ? this.locate(this.node, this._report) : null;
    if (!handle || !this._report) {
      return;
    }
    handle.view.dispatch({
      effects: setDiagnosticMarks.of(marksFor(this._owner, this._report.diagnostics))
    });
    this._markedView = handle.view;
  }

  private _clearMarks(): void {
    // Only clears marks this output set; newer outputs own theirs.
    this._markedView?.dispatch({
      effects: clearDiagnosticMarks.of(this._owner)
    });
    this._markedView = null;
  }

  private _select(diagnostic: ICompileDiagnostic): void {
    const handle = this._report ? this.locate(this.node, this._report) : null;
    if (!handle || diagnostic.line === null) {
      return;
    }
    handle.activate();
    moveCursorTo(handle.view, diagnostic.line, diagnostic.column);
    handle.view.focus();
  }

  private readonly _mimeType: string;
  private readonly _owner = `cuda-workbench-diagnostics-${++ownerCount}`;
  private _report: IDiagnosticsReport | null = null;
  private _markedView: EditorView | null = null;
}

/** The renderer factory, ranked before text/html and text/plain. */
export function diagnosticsRendererFactory(
  locate: CellEditorLocator
): IRenderMime.IRendererFactory {
  return {
    safe: true,
    mimeTypes: [DIAGNOSTICS_MIME_TYPE],
    defaultRank: 20,
    createRenderer: options => new DiagnosticsRenderer(options, locate)
  };
}
