/**
 * Unit tests for the pure parts of the extension (magic detection, the CUDA
 * language, diagnostics parsing/rendering, status parsing). They import
 * CodeMirror and Lezer through their CommonJS builds, and nothing from
 * @jupyterlab (ES modules only), so no transform of node_modules is needed.
 */
module.exports = {
  testEnvironment: 'jsdom',
  roots: ['<rootDir>/src'],
  testMatch: ['**/__tests__/**/*.spec.ts'],
  transform: {
    '^.+\\.ts$': ['ts-jest', { tsconfig: '<rootDir>/tsconfig.test.json' }]
  }
};
