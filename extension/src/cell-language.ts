/**
 * Switches an editor between its own language and CUDA C++ as the first line
 * of the document becomes (or stops being) a `%%cuda` magic line.
 */
import { Compartment, EditorState, Extension, Text } from '@codemirror/state';

import { cudaSupport } from './cuda-language';
import { isCudaCell, MAGIC_PROBE_LENGTH } from './magic';

export interface ICudaCellLanguageOptions {
  /**
   * Whether the editor holds Python (IPython) code, where `%%cuda` is a cell
   * magic; asked on every check, as a notebook's language can change with
   * its kernel. Defaults to always.
   */
  isPython?: () => boolean;
  /**
   * The text the editor will be created with: an editor's first state sees
   * no transaction, so the compartment starts from this. Defaults to ''.
   */
  initialSource?: string;
}

/**
 * A CodeMirror extension holding a compartment that contains `cudaSupport`
 * while the document is a `%%cuda` cell and nothing otherwise (the editor's
 * own language then applies). A transaction extender reconfigures it
 * whenever a transaction leaves the compartment out of step with the
 * document or the language, so the switch is live while typing.
 */
export function cudaCellLanguage(
  options: ICudaCellLanguageOptions = {}
): Extension {
  const isPython = options.isPython ?? (() => true);
  const compartment = new Compartment();
  const wantsCuda = (doc: Text) =>
    isPython() && isCudaCell(doc.sliceString(0, MAGIC_PROBE_LENGTH));
  const initial = wantsCuda(Text.of((options.initialSource ?? '').split(/\r\n?|\n/)));

  return [
    compartment.of(initial ? cudaSupport : []),
    EditorState.transactionExtender.of(tr => {
      const hasCuda = compartment.get(tr.startState) === cudaSupport;
      const wanted = wantsCuda(tr.newDoc);
      return wanted === hasCuda
        ? null
        : { effects: compartment.reconfigure(wanted ? cudaSupport : []) };
    })
  ];
}
