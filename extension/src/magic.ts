/**
 * Detection of the `%%cuda` cell magic.
 *
 * IPython accepts blank lines and indentation before a cell magic, so the
 * magic line is the first non-blank line, and it must be `%%cuda` exactly
 * (followed by options, or nothing): `%%cudafoo` is another magic.
 */

const MAGIC_LINE = /^((?:[ \t]*\r?\n)*)([ \t]*%%cuda)(?=[ \t]|\r?\n|$)[^\r\n]*/;

/**
 * How many characters of a document are enough to decide whether it is a
 * `%%cuda` cell; callers slice this much instead of reading the whole text.
 */
export const MAGIC_PROBE_LENGTH = 1000;

/** Whether a cell's source starts with the `%%cuda` magic line. */
export function isCudaCell(source: string): boolean {
  return MAGIC_LINE.test(source);
}

/**
 * The `[from, to)` range of the `%%cuda ...` line (without its line break),
 * or null when the source is not a `%%cuda` cell.
 */
export function magicLineRange(
  source: string
): { from: number; to: number } | null {
  const match = MAGIC_LINE.exec(source);
  if (!match) {
    return null;
  }
  const from = match[1].length;
  return { from, to: match[0].length };
}
