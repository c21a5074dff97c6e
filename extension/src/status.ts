/**
 * The workbench's backend and device as the kernel reports them: the user
 * expression sent after each cell, and the parsing of its result.
 */

/**
 * Python expression evaluated (silently) in the kernel. It calls
 * `workbench.frontend_status()` only when the extension was already loaded
 * (it never imports workbench) and turns the dict into JSON, as a user
 * expression's result reaches the front end as the `text/plain` repr.
 */
export const STATUS_EXPRESSION =
  "__import__('json').dumps(__import__('sys').modules['workbench'].frontend_status() " +
  "if 'workbench' in __import__('sys').modules else None)";

/** What `workbench.frontend_status()` returns. */
export interface IWorkbenchStatus {
  backend: string;
  device: string;
  short: string;
  usedBytes: number | null;
  totalBytes: number | null;
  label: string;
}

/** The result of one user expression in an execute_reply. */
export interface IUserExpressionResult {
  status?: string;
  data?: Record<string, unknown>;
  ename?: string;
  evalue?: string;
}

/**
 * Undoes Python's `repr()` of a str: strips the quotes and resolves the
 * escapes repr writes (`\\`, `\'`, `\"`, `\n`, `\t`, `\r`, `\xNN`, `\uNNNN`,
 * `\UNNNNNNNN`). Throws an Error on anything else.
 */
export function parsePythonStringRepr(repr: string): string {
  const text = repr.trim();
  const quote = text[0];
  if (
    text.length < 2 ||
    (quote !== "'" && quote !== '"') ||
    text[text.length - 1] !== quote
  ) {
    throw new Error(`not a Python string repr: ${repr}`);
  }
  const body = text.slice(1, -1);
  const simple: Record<string, string> = {
    '\\': '\\',
    "'": "'",
    '"': '"',
    n: '\n',
    t: '\t',
    r: '\r'
  };
  return body.replace(
    /\\(x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|.)/g,
    (_match, escape: string) => {
      if (escape in simple) {
        return simple[escape];
      }
      if (/^[xuU]/.test(escape)) {
        return String.fromCodePoint(parseInt(escape.slice(1), 16));
      }
      throw new Error(`unexpected escape \\${escape} in ${repr}`);
    }
  );
}

function finiteOrNull(value: unknown): number | null {
  return typeof value === 'number' && Number.isFinite(value) ? value : null;
}

/** Bytes in GiB (2^30 bytes), the unit of every size the workbench shows. */
function gibibytes(bytes: number): string {
  return (bytes / 2 ** 30).toFixed(1).replace(/\.0$/, '');
}

/**
 * The label to show: the kernel's own `label` when it gave one, else
 * "<short or backend> · used/total GiB" from the other fields.
 */
export function statusLabel(status: {
  backend?: string;
  short?: string;
  label?: string;
  usedBytes?: number | null;
  totalBytes?: number | null;
}): string {
  if (status.label) {
    return status.label;
  }
  const name = status.short || status.backend || 'workbench';
  if (status.usedBytes == null || status.totalBytes == null) {
    return name;
  }
  return `${name} · ${gibibytes(status.usedBytes)}/${gibibytes(status.totalBytes)} GiB`;
}

/** Turns the decoded `frontend_status()` dict into a status (null for None). */
export function statusFromJson(value: unknown): IWorkbenchStatus | null {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return null;
  }
  const dict = value as Record<string, unknown>;
  const text = (key: string) =>
    typeof dict[key] === 'string' ? (dict[key] as string) : '';
  const status = {
    backend: text('backend'),
    device: text('device'),
    short: text('short'),
    usedBytes: finiteOrNull(dict.used_bytes),
    totalBytes: finiteOrNull(dict.total_bytes),
    label: text('label')
  };
  return { ...status, label: statusLabel(status) };
}

/**
 * Reads the user expression's result: the status when workbench is loaded,
 * null when it is not (the expression gave None), and undefined when the
 * result says nothing (missing, failed, aborted or unreadable), in which case
 * the front end keeps what it showed.
 */
export function parseStatusReply(
  result: IUserExpressionResult | undefined
): IWorkbenchStatus | null | undefined {
  if (!result || result.status !== 'ok' || !result.data) {
    return undefined;
  }
  const plain = result.data['text/plain'];
  if (typeof plain !== 'string') {
    return undefined;
  }
  let decoded: unknown;
  try {
    decoded = JSON.parse(parsePythonStringRepr(plain));
  } catch {
    return undefined;
  }
  return decoded === null ? null : (statusFromJson(decoded) ?? undefined);
}

/** A tooltip with the device's full name and memory use. */
export function statusTooltip(status: IWorkbenchStatus): string {
  const memory =
    status.usedBytes != null && status.totalBytes != null
      ? `, ${gibibytes(status.usedBytes)} of ${gibibytes(status.totalBytes)} GiB used`
      : '';
  const device = status.device ? ` on ${status.device}` : '';
  return `cuda-workbench: ${status.backend || 'unknown'} backend${device}${memory}`;
}

/** The parts of a kernel's IOPub message that `endsWidgetRequest` reads. */
export interface IIOPubMessageLike {
  header: { msg_type: string };
  parent_header: { msg_type?: string } | Record<string, never>;
  content: unknown;
}

/**
 * Whether an IOPub message says the kernel went idle after handling a
 * widget's message (a `comm_msg` from the front end: a panel's "Empty
 * cache" or "Refresh" button, a slider), which can change memory without
 * any cell running, so the status is asked again.
 */
export function endsWidgetRequest(msg: IIOPubMessageLike): boolean {
  const content = msg.content as { execution_state?: string } | null;
  return (
    msg.header.msg_type === 'status' &&
    content?.execution_state === 'idle' &&
    (msg.parent_header as { msg_type?: string }).msg_type === 'comm_msg'
  );
}
