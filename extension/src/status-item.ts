/**
 * The status-bar item showing the workbench's backend and device for the
 * current notebook's kernel, refreshed after every cell it runs and after
 * every widget message the kernel handles (a panel's buttons).
 */
import { NotebookActions, INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { ISignal, Signal } from '@lumino/signaling';
import { Widget } from '@lumino/widgets';

import {
  endsWidgetRequest,
  IUserExpressionResult,
  IWorkbenchStatus,
  parseStatusReply,
  STATUS_EXPRESSION,
  statusTooltip
} from './status';

/** A text item; hidden (inactive) while there is no status to show. */
export class WorkbenchStatusItem extends Widget {
  constructor() {
    super();
    this.addClass('jp-WorkbenchStatus');
  }

  get status(): IWorkbenchStatus | null {
    return this._status;
  }

  set status(status: IWorkbenchStatus | null) {
    this._status = status;
    this.node.textContent = status ? status.label : '';
    this.node.title = status ? statusTooltip(status) : '';
    this._changed.emit();
  }

  /** Emitted when the status (and so whether the item shows) changes. */
  get changed(): ISignal<this, void> {
    return this._changed;
  }

  private _status: IWorkbenchStatus | null = null;
  private readonly _changed = new Signal<this, void>(this);
}

/**
 * Keeps `item` in step with the current notebook: asks the kernel with a
 * silent execute request (no history, no execution count) after each cell
 * run and each widget message it handled (a memory panel's "Empty cache"
 * frees memory with no cell run), forgets the status when the kernel
 * changes or restarts.
 */
export class StatusMonitor {
  constructor(
    private readonly tracker: INotebookTracker,
    private readonly item: WorkbenchStatusItem
  ) {
    tracker.widgetAdded.connect((_, panel) => this._watch(panel));
    tracker.forEach(panel => this._watch(panel));
    tracker.currentChanged.connect(() => this._showCurrent());
    NotebookActions.executed.connect((_, { notebook, cell }) => {
      const panel = tracker.find(p => p.content === notebook);
      if (panel && cell.model.type === 'code') {
        void this.refresh(panel);
      }
    });
  }

  /** Asks the panel's kernel for the status (one request at a time). */
  async refresh(panel: NotebookPanel): Promise<void> {
    if (this._inFlight.has(panel)) {
      this._again.add(panel);
      return;
    }
    const kernel = panel.sessionContext.session?.kernel;
    if (!kernel) {
      return;
    }
    this._inFlight.add(panel);
    try {
      // The expression is Python: other kernels are left alone.
      if ((await kernel.info).language_info.name !== 'python') {
        return;
      }
      const future = kernel.requestExecute({
        code: '',
        silent: true,
        store_history: false,
        allow_stdin: false,
        stop_on_error: false,
        user_expressions: { wb: STATUS_EXPRESSION }
      });
      const reply = await future.done;
      const content = reply.content as {
        user_expressions?: Record<string, IUserExpressionResult>;
      };
      const status = parseStatusReply(content.user_expressions?.wb);
      if (status !== undefined && kernel === panel.sessionContext.session?.kernel) {
        this._statuses.set(panel, status);
        this._showCurrent();
      }
    } catch {
      // The kernel went away or refused the request: keep what was shown.
    } finally {
      this._inFlight.delete(panel);
      if (this._again.delete(panel)) {
        void this.refresh(panel);
      }
    }
  }

  private _watch(panel: NotebookPanel): void {
    const forget = () => {
      this._statuses.delete(panel);
      this._showCurrent();
    };
    panel.sessionContext.kernelChanged.connect(forget);
    panel.sessionContext.iopubMessage.connect((_, msg) => {
      if (endsWidgetRequest(msg)) {
        void this.refresh(panel);
      }
    });
    panel.sessionContext.statusChanged.connect((_, status) => {
      if (status === 'restarting' || status === 'autorestarting' || status === 'dead') {
        forget();
      }
    });
    panel.disposed.connect(() => this._statuses.delete(panel));
  }

  private _showCurrent(): void {
    const panel = this.tracker.currentWidget;
    const status = panel ? this._statuses.get(panel) ?? null : null;
    if (status !== this.item.status) {
      this.item.status = status;
    }
  }

  private readonly _statuses = new Map<NotebookPanel, IWorkbenchStatus | null>();
  private readonly _inFlight = new Set<NotebookPanel>();
  private readonly _again = new Set<NotebookPanel>();
}
