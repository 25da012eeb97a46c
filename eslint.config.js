import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import { layersPlugin } from './eslint-layers.js';
import { constructorsPlugin } from './eslint-constructors.js';

export default tseslint.config(
  { ignores: ['node_modules/', 'data/', 'dist/', '.test-data/', '.bench-data/', 'scratch/', 'coverage/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: {
      globals: {
        process: 'readonly',
        console: 'readonly',
        Buffer: 'readonly',
        setTimeout: 'readonly',
        clearTimeout: 'readonly',
        setInterval: 'readonly',
        clearInterval: 'readonly',
        setImmediate: 'readonly',
        URL: 'readonly',
      },
    },
    plugins: { constructors: constructorsPlugin },
    rules: {
      'constructors/named-deps': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      'no-constant-condition': ['error', { checkLoops: false }],
    },
  },
  {
    files: ['src/**/*.ts'],
    plugins: { layers: layersPlugin },
    rules: { 'layers/imports': 'error' },
  },
  {
    // the house rules' sizes: a file of src/, the console or bench/ at most 500 lines, a function at most 80 (blank lines
    // and comments count)
    files: ['src/**/*.ts', 'console/src/**/*.ts', 'bench/**/*.ts'],
    rules: { 'max-lines': ['error', { max: 500 }], 'max-lines-per-function': ['error', { max: 80 }] },
  },
  {
    // the tests keep the file size; their describe blocks are longer than a function
    files: ['test/**/*.ts'],
    rules: { 'max-lines': ['error', { max: 500 }] },
  },
  {
    files: ['src/**/*.ts', 'console/src/**/*.ts'],
    // Prettier keeps code within 140 but leaves strings, templates (SQL) and comments as written
    rules: { 'max-len': ['error', { code: 140 }] },
  },
);
