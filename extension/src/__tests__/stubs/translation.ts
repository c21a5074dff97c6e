/**
 * The one name JupyterLab's editor theme module imports from
 * @jupyterlab/translation (which pulls in all of JupyterLab's services), for
 * the tests that load that module to use JupyterLab's own highlight style.
 */
export const nullTranslator = {
  load: () => ({ __: (text: string) => text })
};
