/**
 * Compile diagnostics published by the `%%cuda` magic: the payload of the
 * `application/vnd.cuda-workbench.diagnostics+json` MIME type, its parsing
 * and its rendering as a clickable list.
 */

/** The MIME type the kernel publishes compile diagnostics with. */
export const DIAGNOSTICS_MIME_TYPE =
  'application/vnd.cuda-workbench.diagnostics+json';

export type Severity = 'error' | 'warning' | 'note';

const SEVERITIES: readonly Severity[] = ['error', 'warning', 'note'];

/** One compiler message. `line` counts the `%%cuda` line as line 1. */
export interface ICompileDiagnostic {
  severity: Severity;
  /** 1-based line in the cell, or null when the compiler gave none. */
  line: number | null;
  /** 1-based column, or null when the compiler gave none. */
  column: number | null;
  message: string;
}

/** A parsed diagnostics payload. */
export interface IDiagnosticsReport {
  /** The compiler that produced the messages, e.g. "NVRTC". */
  compiler: string;
  diagnostics: ICompileDiagnostic[];
  /** The id of the cell the source came from, when the kernel knows it. */
  cellId: string | null;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function positiveInteger(value: unknown): number | null {
  return typeof value === 'number' && Number.isInteger(value) && value >= 1
    ? value
    : null;
}

/**
 * Checks and normalises a payload. Throws an Error saying what is wrong when
 * it is not an object with a `diagnostics` array of objects with a string
 * `message`; unknown severities read as "error", missing or invalid
 * line/column as null.
 */
export function parseDiagnostics(data: unknown): IDiagnosticsReport {
  if (!isRecord(data)) {
    throw new Error('diagnostics payload is not a JSON object');
  }
  if (!Array.isArray(data.diagnostics)) {
    throw new Error('diagnostics payload has no "diagnostics" array');
  }
  const diagnostics = data.diagnostics.map((item, index) => {
    if (!isRecord(item) || typeof item.message !== 'string') {
      throw new Error(`diagnostic ${index} has no "message" string`);
    }
    const severity = String(item.severity ?? '').toLowerCase() as Severity;
    return {
      severity: SEVERITIES.includes(severity) ? severity : 'error',
      line: positiveInteger(item.line),
      column: positiveInteger(item.column),
      message: item.message
    };
  });
  return {
    compiler: typeof data.compiler === 'string' ? data.compiler : 'compiler',
    diagnostics,
    cellId: typeof data.cell_id === 'string' ? data.cell_id : null
  };
}

function plural(count: number, word: string): string {
  return `${count} ${word}${count === 1 ? '' : 's'}`;
}

/** A one-line summary, e.g. "NVRTC: 1 error, 2 warnings". */
export function summarize(report: IDiagnosticsReport): string {
  const counts = SEVERITIES.map(severity => ({
    severity,
    count: report.diagnostics.filter(d => d.severity === severity).length
  })).filter(({ count }) => count > 0);
  if (counts.length === 0) {
    return `${report.compiler}: no messages`;
  }
  return `${report.compiler}: ${counts
    .map(({ severity, count }) => plural(count, severity))
    .join(', ')}`;
}

/** "line 3:12", "line 3" or "" for a diagnostic without a line. */
export function locationText(diagnostic: ICompileDiagnostic): string {
  if (diagnostic.line === null) {
    return '';
  }
  return diagnostic.column === null
    ? `line ${diagnostic.line}`
    : `line ${diagnostic.line}:${diagnostic.column}`;
}

/**
 * Renders the report as a summary and a list: one item per diagnostic with
 * its severity, location and message. Items with a line are buttons (click,
 * Enter or Space) that call `onSelect` with their diagnostic.
 */
export function renderDiagnostics(
  report: IDiagnosticsReport,
  onSelect: (diagnostic: ICompileDiagnostic) => void,
  doc: Document = document
): HTMLElement {
  const root = doc.createElement('div');
  root.className = 'jp-WorkbenchDiagnostics';

  const header = doc.createElement('div');
  header.className = 'jp-WorkbenchDiagnostics-summary';
  header.textContent = summarize(report);
  root.appendChild(header);

  const list = doc.createElement('ul');
  list.className = 'jp-WorkbenchDiagnostics-list';
  for (const diagnostic of report.diagnostics) {
    const item = doc.createElement('li');
    item.className = `jp-WorkbenchDiagnostics-item jp-mod-${diagnostic.severity}`;

    const severity = doc.createElement('span');
    severity.className = 'jp-WorkbenchDiagnostics-severity';
    severity.textContent = diagnostic.severity;
    const location = doc.createElement('span');
    location.className = 'jp-WorkbenchDiagnostics-location';
    location.textContent = locationText(diagnostic);
    const message = doc.createElement('span');
    message.className = 'jp-WorkbenchDiagnostics-message';
    message.textContent = diagnostic.message;
    item.append(severity, location, message);

    if (diagnostic.line !== null) {
      item.classList.add('jp-mod-clickable');
      item.setAttribute('role', 'button');
      item.tabIndex = 0;
      item.title = `Go to ${locationText(diagnostic)}`;
      item.dataset.line = String(diagnostic.line);
      if (diagnostic.column !== null) {
        item.dataset.column = String(diagnostic.column);
      }
      item.addEventListener('click', () => onSelect(diagnostic));
      item.addEventListener('keydown', event => {
        if (event.key === 'Enter' || event.key === ' ') {
          event.preventDefault();
          onSelect(diagnostic);
        }
      });
    }
    list.appendChild(item);
  }
  root.appendChild(list);
  return root;
}
