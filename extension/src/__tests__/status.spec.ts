import {
  endsWidgetRequest,
  IUserExpressionResult,
  parsePythonStringRepr,
  parseStatusReply,
  STATUS_EXPRESSION,
  statusFromJson,
  statusLabel,
  statusTooltip
} from '../status';
import userExpressions from './fixtures/user-expressions.json';

/**
 * Results of STATUS_EXPRESSION-shaped user expressions as IPython's
 * `InteractiveShell.user_expressions` returned them (recorded once).
 */
const recorded = userExpressions as Record<string, IUserExpressionResult>;

describe('STATUS_EXPRESSION', () => {
  it('calls frontend_status only when workbench is already imported', () => {
    expect(STATUS_EXPRESSION).toContain("__import__('sys').modules['workbench'].frontend_status()");
    expect(STATUS_EXPRESSION).toContain("if 'workbench' in __import__('sys').modules else None");
    expect(STATUS_EXPRESSION).not.toMatch(/\bimport workbench\b/);
  });
});

describe('parsePythonStringRepr', () => {
  it.each([
    ["'abc'", 'abc'],
    ['"it\'s"', "it's"],
    ["'it\\'s'", "it's"],
    ["'a\\\\b'", 'a\\b'],
    ["'tab\\tnew\\nline'", 'tab\tnew\nline'],
    ["'\\xb7 \\u00b7 \\U0001f600'", '\u00b7 \u00b7 \u{1f600}'],
    ["'H100 · 2.9/74.5 GiB'", 'H100 · 2.9/74.5 GiB']
  ])('reads %s', (repr, text) => {
    expect(parsePythonStringRepr(repr)).toBe(text);
  });

  it.each(["abc", "'abc", "{'a': 1}", "'bad \\q escape'"])('rejects %s', repr => {
    expect(() => parsePythonStringRepr(repr)).toThrow();
  });
});

describe('parseStatusReply', () => {
  it('reads the status of a loaded workbench', () => {
    expect(parseStatusReply(recorded.gpu)).toEqual({
      backend: 'cupy',
      device: 'NVIDIA H100 80GB HBM3',
      short: 'H100',
      usedBytes: 3100000000,
      totalBytes: 80000000000,
      label: 'H100 · 2.9/74.5 GiB'
    });
  });

  it('reads quotes and backslashes in names', () => {
    const status = parseStatusReply(recorded.odd)!;
    expect(status.device).toBe('O\'Brien "sim" \\ dev');
    expect(status.label).toBe('simulator · 0.1/74.5 GiB');
  });

  it('is null when workbench is not loaded', () => {
    expect(parseStatusReply(recorded.not_loaded)).toBeNull();
  });

  it('is undefined (keep what is shown) when the expression failed or is missing', () => {
    expect(recorded.failed.status).toBe('error');
    expect(parseStatusReply(recorded.failed)).toBeUndefined();
    expect(parseStatusReply(undefined)).toBeUndefined();
    expect(parseStatusReply({ status: 'ok', data: { 'text/plain': '42' } })).toBeUndefined();
    expect(parseStatusReply({ status: 'ok', data: {} })).toBeUndefined();
  });
});

describe('statusLabel', () => {
  it("prefers the kernel's label", () => {
    expect(statusLabel({ label: 'simulator · 0.1/80 GiB', short: 'x' })).toBe('simulator · 0.1/80 GiB');
  });

  it('composes one from the other fields otherwise', () => {
    const gib = 2 ** 30;
    expect(statusLabel({ short: 'H100', usedBytes: 3.1 * gib, totalBytes: 80 * gib })).toBe('H100 · 3.1/80 GiB');
    expect(statusLabel({ backend: 'simulator', short: '', usedBytes: 0, totalBytes: 8 * gib })).toBe(
      'simulator · 0/8 GiB'
    );
    expect(statusLabel({ backend: 'simulator' })).toBe('simulator');
  });

  it('is used by statusFromJson for a status without a label', () => {
    const gib = 2 ** 30;
    const status = statusFromJson({ backend: 'cupy', short: 'A100', used_bytes: 1.5 * gib, total_bytes: 40 * gib })!;
    expect(status.label).toBe('A100 · 1.5/40 GiB');
    expect(statusTooltip(status)).toBe('cuda-workbench: cupy backend, 1.5 of 40 GiB used');
  });
});

describe('endsWidgetRequest', () => {
  const status = (state: string, parent: string | null) => ({
    header: { msg_type: 'status' },
    parent_header: parent === null ? {} : { msg_type: parent },
    content: { execution_state: state }
  });

  it('is true when the kernel goes idle after a widget message', () => {
    expect(endsWidgetRequest(status('idle', 'comm_msg'))).toBe(true);
  });

  it('is false for cells and the status request itself (no loop), busy states and other messages', () => {
    expect(endsWidgetRequest(status('idle', 'execute_request'))).toBe(false);
    expect(endsWidgetRequest(status('busy', 'comm_msg'))).toBe(false);
    expect(endsWidgetRequest(status('idle', 'kernel_info_request'))).toBe(false);
    expect(endsWidgetRequest(status('idle', null))).toBe(false);
    expect(
      endsWidgetRequest({
        header: { msg_type: 'comm_msg' },
        parent_header: { msg_type: 'comm_msg' },
        content: { data: {} }
      })
    ).toBe(false);
  });
});
