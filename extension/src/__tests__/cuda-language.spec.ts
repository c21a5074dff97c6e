import { cppLanguage } from '@codemirror/lang-cpp';
import { ensureSyntaxTree } from '@codemirror/language';
import { EditorState } from '@codemirror/state';
import { Tree } from '@lezer/common';
import { classHighlighter, highlightTree } from '@lezer/highlight';

import {
  cudaLanguage,
  cudaSupport,
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
