/**
 * Unit tests for the pure parts of the extension (magic detection, the CUDA
 * language, diagnostics parsing/rendering, status parsing). They import
 * CodeMirror and Lezer through their CommonJS builds. Of @jupyterlab (ES
 * modules only) they load one module, the editor theme holding JupyterLab's
 * highlight style, which ts-jest turns into CommonJS; its one import of
 * @jupyterlab/translation is a stub.
 */
const JUPYTERLAB_THEME = '@jupyterlab/codemirror/lib/theme\\.js$';

module.exports = {
  testEnvironment: 'jsdom',
  roots: ['<rootDir>/src'],
  testMatch: ['**/__tests__/**/*.spec.ts'],
  moduleNameMapper: {
    '^@jupyterlab/translation$': '<rootDir>/src/__tests__/stubs/translation.ts'
  },
  transform: {
    '^.+\\.ts$': ['ts-jest', { tsconfig: '<rootDir>/tsconfig.test.json' }],
    [JUPYTERLAB_THEME]: ['ts-jest', { tsconfig: '<rootDir>/tsconfig.test.json' }]
  },
  transformIgnorePatterns: [`/node_modules/(?!${JUPYTERLAB_THEME})`]
};
