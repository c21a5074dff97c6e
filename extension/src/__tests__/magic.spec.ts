import { isCudaCell, magicLineRange } from '../magic';

describe('isCudaCell', () => {
  it.each([
    '%%cuda',
    '%%cuda\n__global__ void k() {}',
    '%%cuda -n saxpy --arch sm_90\nint x;',
    '%%cuda\r\nint x;',
    '\n\n%%cuda\nint x;',
    '  %%cuda -n k\nint x;',
    '%%cuda\t-n k'
  ])('accepts %j', source => {
    expect(isCudaCell(source)).toBe(true);
  });

  it.each([
    '',
    'x = 1',
    '%%cudax\nint x;',
    '%%cuda_check',
    '%cuda -n k',
    '# %%cuda',
    'x = 1\n%%cuda\nint x;',
    '%%time\n%%cuda\nint x;',
    '%% cuda'
  ])('rejects %j', source => {
    expect(isCudaCell(source)).toBe(false);
  });
});

describe('magicLineRange', () => {
  it('covers the magic line with its options, not the line break', () => {
    const source = '%%cuda -n saxpy\nint x;';
    const range = magicLineRange(source)!;
    expect(source.slice(range.from, range.to)).toBe('%%cuda -n saxpy');
  });

  it('starts after leading blank lines', () => {
    const source = '\n  \n%%cuda\nint x;';
    const range = magicLineRange(source)!;
    expect(source.slice(range.from, range.to)).toBe('%%cuda');
    expect(range.from).toBe(4);
  });

  it('is null for other cells', () => {
    expect(magicLineRange('print(1)')).toBeNull();
  });
});
