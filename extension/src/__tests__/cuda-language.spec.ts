import { cppLanguage } from '@codemirror/lang-cpp';
import { ensureSyntaxTree, HighlightStyle, syntaxHighlighting } from '@codemirror/language';
import { EditorState } from '@codemirror/state';
import { jupyterHighlightStyle } from '@jupyterlab/codemirror/lib/theme';
import { Tree } from '@lezer/common';
import { classHighlighter, Highlighter, highlightTree } from '@lezer/highlight';

import {
  cudaFileSupport,
  cudaHighlightStyle,
  cudaLanguage,
  cudaSupport,
  cudaTokenClass,
  cudaTokens,
  cudaWordKind,
  maskCudaSource
} from '../cuda-language';

const KERNEL = [
  '%%cuda -n saxpy --arch sm_90',
  '#include <cuda_fp16.h>',
  'extern "C" __global__ void __launch_bounds__(256, 2)',
  'saxpy(int n, float a, const float* __restrict__ x, float* __restrict__ y) {',
  '  __shared__ float tile[256];',
  '  int i = blockIdx.x * blockDim.x + threadIdx.x;  // threadIdx in a comment',
  '  if (i < n) y[i] = a * x[i] + y[i];',
  '  __syncthreads();',
  '  float v = __shfl_down_sync(0xffffffff, y[i], 16);',
  '  atomicAdd(&y[0], v);',
  '  const char* s = "blockIdx in a string";',
  '  float4 q; dim3 my_threadIdx;',
  '}'
].join('\n');

function stateFor(doc: string): EditorState {
  const state = EditorState.create({ doc, extensions: [cudaSupport] });
  expect(ensureSyntaxTree(state, state.doc.length, 5000)).not.toBeNull();
  return state;
}

function errorCount(tree: Tree): number {
  let errors = 0;
  tree.iterate({
    enter: node => {
      if (node.type.isError) {
        errors++;
      }
    }
  });
  return errors;
}

/** The classHighlighter classes of each token, keyed by its text. */
function tokenClasses(doc: string, tree: Tree): Map<string, string> {
  const classes = new Map<string, string>();
  highlightTree(tree, classHighlighter, (from, to, cls) => {
    classes.set(doc.slice(from, to), cls);
  });
  return classes;
}

describe('maskCudaSource', () => {
  it('keeps the length and line breaks', () => {
    const masked = maskCudaSource(KERNEL);
    expect(masked).toHaveLength(KERNEL.length);
    expect(masked.split('\n').map(l => l.length)).toEqual(
      KERNEL.split('\n').map(l => l.length)
    );
  });

  it('blanks the magic line, the qualifiers and launch bounds', () => {
    const lines = maskCudaSource(KERNEL).split('\n');
    expect(lines[0].trim()).toBe('');
    expect(lines[2].trim()).toBe('extern "C"            void');
    expect(lines[3]).not.toContain('__restrict__');
    expect(lines[4].trim()).toBe('float tile[256];');
  });

  it('leaves identifiers that only contain a qualifier alone', () => {
    expect(maskCudaSource('int my__global__;')).toBe('int my__global__;');
    expect(maskCudaSource('int __global__x;')).toBe('int __global__x;');
  });

  it('leaves a non-%%cuda first line alone', () => {
    expect(maskCudaSource('%%time\nint x;')).toBe('%%time\nint x;');
  });
});

describe('cudaLanguage', () => {
  it('parses a CUDA kernel as error-free C++, unlike the plain C++ parser', () => {
    const state = stateFor(KERNEL);
    const tree = ensureSyntaxTree(state, state.doc.length, 5000)!;
    expect(errorCount(tree)).toBe(0);
    expect(errorCount(cppLanguage.parser.parse(KERNEL))).toBeGreaterThan(0);
  });

  it('finds the kernel as a function definition', () => {
    const state = stateFor(KERNEL);
    const tree = ensureSyntaxTree(state, state.doc.length, 5000)!;
    const names: string[] = [];
    tree.iterate({
      enter: node => {
        if (node.name === 'FunctionDefinition') {
          const declarator = node.node.getChild('FunctionDeclarator');
          const name = declarator?.firstChild;
          names.push(name ? state.doc.sliceString(name.from, name.to) : '?');
        }
      }
    });
    expect(names).toEqual(['saxpy']);
  });

  it('gives C++ tokens their highlighting classes', () => {
    const state = stateFor(KERNEL);
    const classes = tokenClasses(KERNEL, ensureSyntaxTree(state, state.doc.length, 5000)!);
    expect(classes.get('void')).toContain('tok-typeName');
    expect(classes.get('float')).toContain('tok-typeName');
    expect(classes.get('if')).toContain('tok-keyword');
    expect(classes.get('extern')).toContain('tok-keyword');
    expect(classes.get('256')).toContain('tok-number');
    expect(classes.get('// threadIdx in a comment')).toContain('tok-comment');
    expect(classes.get('"blockIdx in a string"')).toContain('tok-string');
  });

  it('is the language of a state that has cudaSupport', () => {
    const state = stateFor('int x;');
    expect(cudaLanguage.isActiveAt(state, 1)).toBe(true);
  });
});

describe('cudaWordKind', () => {
  it.each([
    ['__global__', 'qualifier'],
    ['__device__', 'qualifier'],
    ['__host__', 'qualifier'],
    ['__shared__', 'qualifier'],
    ['__constant__', 'qualifier'],
    ['__restrict__', 'qualifier'],
    ['__launch_bounds__', 'qualifier'],
    ['threadIdx', 'builtin'],
    ['blockIdx', 'builtin'],
    ['blockDim', 'builtin'],
    ['gridDim', 'builtin'],
    ['warpSize', 'builtin'],
    ['__syncthreads', 'intrinsic'],
    ['__syncwarp', 'intrinsic'],
    ['__shfl_sync', 'intrinsic'],
    ['__shfl_up_sync', 'intrinsic'],
    ['__shfl_down_sync', 'intrinsic'],
    ['__shfl_xor_sync', 'intrinsic'],
    ['atomicAdd', 'intrinsic'],
    ['atomicCAS_block', 'intrinsic'],
    ['dim3', 'type'],
    ['float4', 'type'],
    ['__half', 'type']
  ])('%s is a %s', (word, kind) => {
    expect(cudaWordKind(word)).toBe(kind);
  });

  it.each(['threadIdx_', 'global', 'x', 'float', 'atomicadd'])('%s is not CUDA', word => {
    expect(cudaWordKind(word)).toBeUndefined();
  });
});

describe('cudaTokens', () => {
  it('lists the magic line and CUDA words outside comments and strings', () => {
    const state = stateFor(KERNEL);
    const found = cudaTokens(state).map(t => [
      state.doc.sliceString(t.from, t.to),
      t.kind,
      state.doc.lineAt(t.from).number
    ]);
    expect(found).toEqual([
      ['%%cuda -n saxpy --arch sm_90', 'magic', 1],
      ['__global__', 'qualifier', 3],
      ['__launch_bounds__', 'qualifier', 3],
      ['__restrict__', 'qualifier', 4],
      ['__restrict__', 'qualifier', 4],
      ['__shared__', 'qualifier', 5],
      ['blockIdx', 'builtin', 6],
      ['blockDim', 'builtin', 6],
      ['threadIdx', 'builtin', 6],
      ['__syncthreads', 'intrinsic', 8],
      ['__shfl_down_sync', 'intrinsic', 9],
      ['atomicAdd', 'intrinsic', 10],
      ['float4', 'type', 12],
      ['dim3', 'type', 12]
    ]);
  });

  it('limits itself to the lines of the requested range', () => {
    const state = stateFor(KERNEL);
    const line = state.doc.line(6);
    const words = cudaTokens(state, line.from + 10, line.from + 12).map(t =>
      state.doc.sliceString(t.from, t.to)
    );
    expect(words).toEqual(['blockIdx', 'blockDim', 'threadIdx']);
  });
});

/** A templated kernel with C++'s keywords and types, as a newcomer writes one. */
const TEMPLATED = [
  '%%cuda -n scale',
  'template <typename T, int TILE>',
  '__global__ void scale(const T* __restrict__ x, T* y, unsigned int n, float a) {',
  '  __shared__ float tile[TILE];',
  '  size_t i = blockIdx.x * blockDim.x + threadIdx.x;',
  '  double d = 0.5; long long w = 0; short s = 1; char c = 0; bool ok = true;',
  '  dim3 b;',
  '  if (i < n) { y[i] = static_cast<T>(a) * x[i]; }',
  '  return;',
  '}'
].join('\n');

const TYPE_COLOUR = 'var(--jp-mirror-editor-variable-3-color)';
const KEYWORD_COLOUR = 'var(--jp-mirror-editor-keyword-color)';

/** The `color` each class of some highlight styles sets, read from their CSS rules. */
function colours(styles: HighlightStyle[]): Map<string, string> {
  const byClass = new Map<string, string>();
  for (const style of styles) {
    const rules = style.module?.getRules() ?? '';
    for (const match of rules.matchAll(/\.([^\s{,]+)\s*\{([^}]*)\}/g)) {
      const colour = /(?:^|;)\s*color:\s*([^;]+)/.exec(match[2]);
      if (colour && colour[1].trim()) {
        byClass.set(match[1], colour[1].trim());
      }
    }
  }
  return byClass;
}

/**
 * The colour of each word of a `%%cuda` cell, keyed by its text, as an editor
 * with `styles` draws it: the C++ tokens through the syntax tree, CUDA's
 * words through their decorations (which win, being drawn inside).
 */
function wordColours(doc: string, styles: HighlightStyle[]): Map<string, string | null> {
  const state = EditorState.create({
    doc,
    extensions: [cudaSupport, ...styles.map(style => syntaxHighlighting(style))]
  });
  const tree = ensureSyntaxTree(state, state.doc.length, 5000)!;
  const byClass = colours(styles);
  const colourOf = (classes: string) =>
    classes
      .split(' ')
      .map(cls => byClass.get(cls))
      .filter(Boolean)
      .pop() ?? null;
  const result = new Map<string, string | null>();
  highlightTree(tree, styles as Highlighter[], (from, to, classes) => {
    result.set(doc.slice(from, to), colourOf(classes));
  });
  for (const token of cudaTokens(state)) {
    result.set(doc.slice(token.from, token.to), colourOf(cudaTokenClass(state, token.kind)));
  }
  return result;
}

describe('the colours of a %%cuda cell in JupyterLab', () => {
  const TYPES = ['void', 'int', 'float', 'unsigned', 'double', 'long', 'short', 'char', 'bool', 'size_t', 'T'];

  it("are missing for C++ types under JupyterLab's own highlight style (the cause)", () => {
    const plain = wordColours(TEMPLATED, [jupyterHighlightStyle]);
    for (const word of TYPES) {
      expect([word, plain.get(word) ?? null]).toEqual([word, null]);
    }
    // Its keywords are coloured, so only the types were left plain.
    expect(plain.get('template')).toBe(KEYWORD_COLOUR);
  });

  it('colour every C++ type and keyword once the cell is CUDA', () => {
    const coloured = wordColours(TEMPLATED, [jupyterHighlightStyle, cudaHighlightStyle]);
    for (const word of [...TYPES, 'dim3']) {
      expect([word, coloured.get(word)]).toEqual([word, TYPE_COLOUR]);
    }
    for (const word of ['template', 'typename', 'const', 'if', 'return', '__global__', '__shared__', '__restrict__']) {
      expect([word, coloured.get(word)]).toEqual([word, KEYWORD_COLOUR]);
    }
    expect(coloured.get('threadIdx')).toBe('var(--jp-mirror-editor-builtin-color)');
    expect(coloured.get('0.5')).toBe('var(--jp-mirror-editor-number-color)');
    // Names stay in the text colour.
    expect(coloured.get('n') ?? null).toBeNull();
  });

  it("leave JupyterLab's own rules alone: keywords, numbers, strings and comments", () => {
    const doc = '%%cuda\nint f() { return 1; } // c\nconst char* s = "s";';
    const ours = new Map<string, string>();
    const state = EditorState.create({ doc, extensions: [cudaSupport] });
    highlightTree(ensureSyntaxTree(state, doc.length, 5000)!, cudaHighlightStyle, (from, to, cls) => {
      ours.set(doc.slice(from, to), cls);
    });
    expect([...ours.keys()].sort()).toEqual(['char', 'int']);
  });
});

describe('cudaFileSupport', () => {
  it('gives a .cu file the language and the colours of a %%cuda cell', () => {
    const source = TEMPLATED.split('\n').slice(1).join('\n');
    const state = EditorState.create({
      doc: source,
      extensions: [cudaFileSupport(), syntaxHighlighting(jupyterHighlightStyle)]
    });
    expect(cudaLanguage.isActiveAt(state, 1)).toBe(true);
    const tree = ensureSyntaxTree(state, state.doc.length, 5000)!;
    expect(errorCount(tree)).toBe(0);
    const typed: string[] = [];
    highlightTree(tree, cudaHighlightStyle, (from, to) => {
      typed.push(source.slice(from, to));
    });
    expect(new Set(typed)).toEqual(
      new Set(['T', 'int', 'void', 'float', 'unsigned', 'size_t', 'double', 'long', 'short', 'char', 'bool', 'dim3'])
    );
    expect(cudaTokens(state).map(t => source.slice(t.from, t.to))).toContain('__global__');
  });
});
