/**
 * cuda-workbench's JupyterLab extension:
 * - `%%cuda` cells are highlighted as CUDA C++ (live, as the magic line
 *   comes and goes), and so are `.cu` and `.cuh` files;
 * - compile diagnostics (`application/vnd.cuda-workbench.diagnostics+json`)
 *   render as a clickable list and mark their lines in the cell's editor;
 * - a status-bar item shows the workbench's backend and device.
 */
import {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import {
  CodeMirrorEditor,
  EditorExtensionRegistry,
  IEditorExtensionRegistry,
  IEditorLanguageRegistry
} from '@jupyterlab/codemirror';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { IRenderMimeRegistry } from '@jupyterlab/rendermime';
import { IStatusBar } from '@jupyterlab/statusbar';
import type { Cell } from '@jupyterlab/cells';

import { cudaCellLanguage } from './cell-language';
import { cudaFileSupport } from './cuda-language';
import { IDiagnosticsReport } from './diagnostics';
import { diagnosticMarksField } from './line-marks';
import { CellEditorLocator, diagnosticsRendererFactory, ICellEditorHandle } from './renderer';
import { StatusMonitor, WorkbenchStatusItem } from './status-item';

const PYTHON_MIME = /^text\/x-i?python$/;

const highlighting: JupyterFrontEndPlugin<void> = {
  id: 'cuda-workbench:highlighting',
  description:
    'Highlights %%cuda cells and .cu files as CUDA C++ and marks compile diagnostics in editors.',
  autoStart: true,
  requires: [IEditorExtensionRegistry],
  optional: [IEditorLanguageRegistry],
  activate: (
    _app: JupyterFrontEnd,
    registry: IEditorExtensionRegistry,
    languages: IEditorLanguageRegistry | null
  ) => {
    languages?.addLanguage({
      name: 'CUDA',
      displayName: 'CUDA C++',
      mime: 'text/x-cuda-src',
      extensions: ['cu', 'cuh'],
      support: cudaFileSupport()
    });
    registry.addExtension({
      name: 'cuda-workbench:cuda-cells',
      factory: options =>
        EditorExtensionRegistry.createImmutableExtension(
          cudaCellLanguage({
            isPython: () => PYTHON_MIME.test(options.model.mimeType),
            initialSource: options.model.sharedModel.getSource()
          })
        )
    });
    registry.addExtension({
      name: 'cuda-workbench:diagnostic-lines',
      factory: () =>
        EditorExtensionRegistry.createImmutableExtension(diagnosticMarksField)
    });
  }
};

function editorHandle(panel: NotebookPanel, cell: Cell): ICellEditorHandle | null {
  const editor = cell.editor;
  if (!(editor instanceof CodeMirrorEditor)) {
    return null;
  }
  return {
    view: editor.editor,
    activate: () => {
      const notebook = panel.content;
      const index = notebook.widgets.indexOf(cell);
      if (index >= 0) {
        notebook.activeCellIndex = index;
        notebook.mode = 'edit';
      }
    }
  };
}

function cellLocator(tracker: INotebookTracker): CellEditorLocator {
  return (node: HTMLElement, report: IDiagnosticsReport) => {
    let handle: ICellEditorHandle | null = null;
    tracker.find(panel => {
      const cell = panel.content.widgets.find(c => c.node.contains(node));
      handle = cell ? editorHandle(panel, cell) : null;
      return cell !== undefined;
    });
    if (!handle && report.cellId && tracker.currentWidget) {
      const panel = tracker.currentWidget;
      const cell = panel.content.widgets.find(c => c.model.id === report.cellId);
      handle = cell ? editorHandle(panel, cell) : null;
    }
    return handle;
  };
}

const diagnostics: JupyterFrontEndPlugin<void> = {
  id: 'cuda-workbench:diagnostics',
  description: 'Renders %%cuda compile diagnostics as a list that jumps to the line.',
  autoStart: true,
  requires: [IRenderMimeRegistry, INotebookTracker],
  activate: (
    _app: JupyterFrontEnd,
    rendermime: IRenderMimeRegistry,
    tracker: INotebookTracker
  ) => {
    rendermime.addFactory(diagnosticsRendererFactory(cellLocator(tracker)));
  }
};

const status: JupyterFrontEndPlugin<void> = {
  id: 'cuda-workbench:status',
  description: "Shows the workbench's backend and device in the status bar.",
  autoStart: true,
  requires: [INotebookTracker],
  optional: [IStatusBar],
  activate: (
    _app: JupyterFrontEnd,
    tracker: INotebookTracker,
    statusBar: IStatusBar | null
  ) => {
    if (!statusBar) {
      return;
    }
    const item = new WorkbenchStatusItem();
    statusBar.registerStatusItem('cuda-workbench:status', {
      item,
      align: 'left',
      rank: 5,
      isActive: () => item.status !== null,
      activeStateChanged: item.changed
    });
    new StatusMonitor(tracker, item);
  }
};

export default [highlighting, diagnostics, status];
