/**
 * CUDA C++ for CodeMirror 6: CodeMirror's C++ language, fed a copy of the
 * cell in which CUDA's declaration qualifiers and the `%%cuda` line are
 * blanked out (so `__global__ void f(...)` parses as a plain function), a
 * decoration layer that highlights CUDA's own words (qualifiers, built-in
 * variables, intrinsics, vector types) with the editor's highlight style,
 * and colours for the C++ tags that JupyterLab's style leaves plain (types).
 */
import { cppLanguage } from '@codemirror/lang-cpp';
import {
  HighlightStyle,
  highlightingFor,
  Language,
  LanguageSupport,
  syntaxHighlighting,
  syntaxTree
} from '@codemirror/language';
import { EditorState, Extension, Prec, RangeSetBuilder } from '@codemirror/state';
import {
  Decoration,
  DecorationSet,
  EditorView,
  ViewPlugin,
  ViewUpdate
} from '@codemirror/view';
import {
  Input,
  Parser,
  PartialParse,
  SyntaxNode,
  Tree,
  TreeFragment
} from '@lezer/common';
import { classHighlighter, Tag, tags } from '@lezer/highlight';

import { magicLineRange, MAGIC_PROBE_LENGTH } from './magic';

/** What a CUDA word is, which decides its highlighting tag and class. */
export type CudaTokenKind =
  | 'magic'
  | 'qualifier'
  | 'builtin'
  | 'intrinsic'
  | 'type';

/** Declaration qualifiers and attributes; blanked out before parsing. */
export const CUDA_QUALIFIERS: readonly string[] = [
  '__global__',
  '__device__',
  '__host__',
  '__shared__',
  '__constant__',
  '__managed__',
  '__restrict__',
  '__forceinline__',
  '__noinline__',
  '__inline__',
  '__grid_constant__',
  '__launch_bounds__',
  '__cluster_dims__',
  '__maxnreg__',
  '__align__'
];

/** Qualifiers that take an argument list, blanked out together with it. */
const QUALIFIERS_WITH_ARGUMENTS = [
  '__launch_bounds__',
  '__cluster_dims__',
  '__maxnreg__',
  '__align__'
];

/** Built-in variables of a kernel. */
export const CUDA_BUILTIN_VARIABLES: readonly string[] = [
  'threadIdx',
  'blockIdx',
  'blockDim',
  'gridDim',
  'warpSize'
];

const ATOMICS = [
  'atomicAdd',
  'atomicSub',
  'atomicExch',
  'atomicMin',
  'atomicMax',
  'atomicInc',
  'atomicDec',
  'atomicCAS',
  'atomicAnd',
  'atomicOr',
  'atomicXor'
];

/** Device intrinsics and built-in functions. */
export const CUDA_INTRINSICS: readonly string[] = [
  '__syncthreads',
  '__syncthreads_count',
  '__syncthreads_and',
  '__syncthreads_or',
  '__syncwarp',
  '__threadfence',
  '__threadfence_block',
  '__threadfence_system',
  '__nanosleep',
  '__shfl_sync',
  '__shfl_up_sync',
  '__shfl_down_sync',
  '__shfl_xor_sync',
  '__ballot_sync',
  '__any_sync',
  '__all_sync',
  '__uni_sync',
  '__match_any_sync',
  '__match_all_sync',
  '__activemask',
  '__reduce_add_sync',
  '__reduce_min_sync',
  '__reduce_max_sync',
  '__reduce_and_sync',
  '__reduce_or_sync',
  '__reduce_xor_sync',
  ...ATOMICS,
  ...ATOMICS.map(name => `${name}_block`),
  ...ATOMICS.map(name => `${name}_system`),
  '__popc',
  '__popcll',
  '__clz',
  '__clzll',
  '__ffs',
  '__ffsll',
  '__brev',
  '__brevll',
  '__byte_perm',
  '__funnelshift_l',
  '__funnelshift_r',
  '__ldg',
  '__ldcg',
  '__ldca',
  '__ldcs',
  '__ldlu',
  '__ldcv',
  '__stwb',
  '__stcg',
  '__stcs',
  '__stwt',
  '__fdividef',
  '__expf',
  '__exp10f',
  '__logf',
  '__log2f',
  '__sinf',
  '__cosf',
  '__tanf',
  '__powf',
  '__fmaf_rn',
  '__fmul_rn',
  '__fadd_rn',
  '__fsub_rn',
  '__frcp_rn',
  '__fsqrt_rn',
  '__saturatef',
  '__float2int_rn',
  '__int2float_rn',
  '__float2half',
  '__half2float',
  '__float2bfloat16',
  '__bfloat162float',
  '__hadd',
  '__hsub',
  '__hmul',
  '__hfma',
  'clock',
  'clock64',
  '__trap',
  '__brkpt'
];

const VECTOR_BASES = [
  'char',
  'uchar',
  'short',
  'ushort',
  'int',
  'uint',
  'long',
  'ulong',
  'longlong',
  'ulonglong',
  'float',
  'double'
];

/** CUDA's own types: dim3, the vector types and the half types. */
export const CUDA_TYPES: readonly string[] = [
  'dim3',
  'half',
  'half2',
  '__half',
  '__half2',
  '__nv_bfloat16',
  '__nv_bfloat162',
  ...VECTOR_BASES.flatMap(base => [1, 2, 3, 4].map(n => `${base}${n}`))
];

const WORD_KINDS = new Map<string, CudaTokenKind>([
  ...CUDA_TYPES.map(w => [w, 'type'] as [string, CudaTokenKind]),
  ...CUDA_INTRINSICS.map(w => [w, 'intrinsic'] as [string, CudaTokenKind]),
  ...CUDA_BUILTIN_VARIABLES.map(w => [w, 'builtin'] as [string, CudaTokenKind]),
  ...CUDA_QUALIFIERS.map(w => [w, 'qualifier'] as [string, CudaTokenKind])
]);

/** The kind of a CUDA word, or undefined for any other identifier. */
export function cudaWordKind(word: string): CudaTokenKind | undefined {
  return WORD_KINDS.get(word);
}

/** The highlighting tag each kind is drawn with (so themes apply). */
export const CUDA_TOKEN_TAGS: Record<CudaTokenKind, Tag> = {
  magic: tags.meta,
  qualifier: tags.modifier,
  builtin: tags.standard(tags.variableName),
  intrinsic: tags.standard(tags.function(tags.variableName)),
  type: tags.standard(tags.typeName)
};

const QUALIFIER_WITH_ARGUMENTS_RE = new RegExp(
  `\\b(?:${QUALIFIERS_WITH_ARGUMENTS.join('|')})[ \\t]*\\([^()\\r\\n]*(?:\\([^()\\r\\n]*\\)[^()\\r\\n]*)*\\)`,
  'g'
);
const QUALIFIER_RE = new RegExp(`\\b(?:${CUDA_QUALIFIERS.join('|')})\\b`, 'g');

function blank(text: string): string {
  return text.replace(/[^\r\n]/g, ' ');
}

/**
 * The source the C++ parser sees: same length and line breaks as `source`,
 * with the `%%cuda` line and the CUDA qualifiers (with the argument lists
 * of `__launch_bounds__(...)` and the like, on one line) turned into spaces.
 */
export function maskCudaSource(source: string): string {
  let masked = source;
  const magic = magicLineRange(source);
  if (magic) {
    masked =
      masked.slice(0, magic.from) +
      blank(masked.slice(magic.from, magic.to)) +
      masked.slice(magic.to);
  }
  return masked
    .replace(QUALIFIER_WITH_ARGUMENTS_RE, blank)
    .replace(QUALIFIER_RE, blank);
}

class StringInput implements Input {
  constructor(private readonly text: string) {}
  get length(): number {
    return this.text.length;
  }
  chunk(from: number): string {
    return this.text.slice(from);
  }
  readonly lineChunks = false;
  read(from: number, to: number): string {
    return this.text.slice(from, to);
  }
}

/** Parses the masked copy of the document with the C++ parser. */
class MaskedCudaParser extends Parser {
  constructor(private readonly cpp: Parser) {
    super();
  }

  createParse(
    input: Input,
    _fragments: readonly TreeFragment[],
    ranges: readonly { from: number; to: number }[]
  ): PartialParse {
    // The old tree's fragments are not passed on: masking can change the
    // text away from an edit (typing after `__global__` makes it a plain
    // word again), which fragment reuse would miss. Cells are small, so they
    // are parsed in full.
    const masked = new StringInput(maskCudaSource(input.read(0, input.length)));
    return this.cpp.createParse(masked, [], ranges);
  }
}

/**
 * CUDA C++ as a CodeMirror language. It shares the C++ language data
 * (comment tokens, indentation, brackets) and the C++ syntax tree.
 */
export const cudaLanguage = new Language(
  cppLanguage.data,
  new MaskedCudaParser(cppLanguage.parser),
  [],
  'cuda'
);

/**
 * Colours for the tags C++ has and Python hardly uses, which JupyterLab's
 * highlight style (written for Python) has no rule for, so that they would
 * be drawn as plain text: the types (`int`, `float`, `void`, `unsigned`,
 * `size_t`, a template's `T`, CUDA's `dim3` and `float4`, all `typeName` or
 * `standard(typeName)` in the C++ grammar), namespaces and macro names.
 * Only these tags, so that JupyterLab's own rules (keywords, numbers,
 * strings, comments...) keep their colours; the colours are the theme's
 * variables, the type colour being the one CodeMirror 5 gave C++ types.
 */
export const cudaHighlightStyle = HighlightStyle.define([
  {
    tag: [tags.typeName, tags.namespace],
    color: 'var(--jp-mirror-editor-variable-3-color)'
  },
  { tag: tags.special(tags.name), color: 'var(--jp-mirror-editor-meta-color)' }
]);

/** A CUDA word (or the magic line) found in the document. */
export interface ICudaToken {
  from: number;
  to: number;
  kind: CudaTokenKind;
}

const NOT_CODE = /Comment|String|CharLiteral/;

function insideCommentOrString(tree: Tree, pos: number): boolean {
  for (let node: SyntaxNode | null = tree.resolveInner(pos, 1); node; node = node.parent) {
    if (NOT_CODE.test(node.name)) {
      return true;
    }
  }
  return false;
}

/**
 * The CUDA words and the `%%cuda` line between `from` and `to` (widened to
 * whole lines), in document order; words in comments and strings are left
 * out. Uses the syntax tree parsed so far.
 */
export function cudaTokens(
  state: EditorState,
  from = 0,
  to = state.doc.length
): ICudaToken[] {
  const doc = state.doc;
  const start = doc.lineAt(from).from;
  const end = doc.lineAt(to).to;
  const tree = syntaxTree(state);
  const tokens: ICudaToken[] = [];
  const magic = magicLineRange(doc.sliceString(0, MAGIC_PROBE_LENGTH));
  if (magic && magic.to > start && magic.from < end) {
    tokens.push({ from: magic.from, to: magic.to, kind: 'magic' });
  }
  const text = doc.sliceString(start, end);
  const word = /[A-Za-z_][A-Za-z0-9_]*/g;
  for (let match = word.exec(text); match; match = word.exec(text)) {
    const kind = cudaWordKind(match[0]);
    const pos = start + match.index;
    if (
      !kind ||
      (magic && pos < magic.to) ||
      insideCommentOrString(tree, pos)
    ) {
      continue;
    }
    tokens.push({ from: pos, to: pos + match[0].length, kind });
  }
  return tokens;
}

/**
 * The classes of a CUDA word of `kind`: `cm-cuda-<kind>`, its `tok-*` class
 * and the classes the state's highlight styles give its tag.
 */
export function cudaTokenClass(state: EditorState, kind: CudaTokenKind): string {
  const tag = CUDA_TOKEN_TAGS[kind];
  return [
    `cm-cuda-${kind}`,
    classHighlighter.style([tag]),
    highlightingFor(state, [tag])
  ]
    .filter(Boolean)
    .join(' ');
}

function cudaDecorations(view: EditorView): DecorationSet {
  const builder = new RangeSetBuilder<Decoration>();
  const marks = new Map<CudaTokenKind, Decoration>();
  for (const { from, to } of view.visibleRanges) {
    for (const token of cudaTokens(view.state, from, to)) {
      let mark = marks.get(token.kind);
      if (!mark) {
        mark = Decoration.mark({ class: cudaTokenClass(view.state, token.kind) });
        marks.set(token.kind, mark);
      }
      builder.add(token.from, token.to, mark);
    }
  }
  return builder.finish();
}

const cudaWordHighlighter = ViewPlugin.fromClass(
  class {
    decorations: DecorationSet;
    constructor(view: EditorView) {
      this.decorations = cudaDecorations(view);
    }
    update(update: ViewUpdate) {
      if (
        update.docChanged ||
        update.viewportChanged ||
        syntaxTree(update.startState) !== syntaxTree(update.state)
      ) {
        this.decorations = cudaDecorations(update.view);
      }
    }
  },
  { decorations: plugin => plugin.decorations }
);

/**
 * Everything a `%%cuda` cell's editor gets: the CUDA language (at highest
 * precedence, so it wins over the Python language JupyterLab configured),
 * the CUDA word decorations, colours for the types, `tok-*` classes on every
 * token (stable class names for tests and user CSS) and a
 * `cm-workbench-cuda` editor class.
 */
export const cudaSupport: Extension = [
  Prec.highest(cudaLanguage.extension),
  cudaWordHighlighter,
  syntaxHighlighting(cudaHighlightStyle),
  syntaxHighlighting(classHighlighter),
  EditorView.editorAttributes.of({ class: 'cm-workbench-cuda' })
];

/**
 * CUDA C++ for a `.cu` or `.cuh` file's editor: the same language, words and
 * colours as a `%%cuda` cell.
 */
export function cudaFileSupport(): LanguageSupport {
  return new LanguageSupport(cudaLanguage, [
    cudaWordHighlighter,
    syntaxHighlighting(cudaHighlightStyle),
    syntaxHighlighting(classHighlighter),
    EditorView.editorAttributes.of({ class: 'cm-workbench-cuda' })
  ]);
}
