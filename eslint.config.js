import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import { layersPlugin } from './eslint-layers.js';

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
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      'no-constant-condition': ['error', { checkLoops: false }],
    },
  },
  {
    files: ['src/**/*.ts'],
    plugins: { layers: layersPlugin },
    rules: { 'layers/imports': 'error' },
  },
);
