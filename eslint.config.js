// ESLint flat config: typescript-eslint's type-aware recommended rules over our own code.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import { join } from 'node:path';
import { layersRule } from './hack/lint/layers.ts';

const srcDir = join(import.meta.dirname, 'src');

export default tseslint.config(
  // clients/java/target: Maven's output, javadoc's scripts among it.
  { ignores: ['dist/', 'node_modules/', 'coverage/', '.results/', 'hack/testbed/*/', 'clients/java/target/'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: { allowDefaultProject: ['eslint.config.js'] } },
    },
    rules: {
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      'no-restricted-syntax': ['error', { selector: 'ExportDefaultDeclaration', message: 'Use named exports.' }],
    },
  },
  {
    // The src/ layer table (hack/lint/layers.ts; docs/design.md "Layers"): what each folder may import.
    files: ['src/**/*.ts'],
    plugins: { fencepost: { rules: { layers: layersRule(srcDir) } } },
    rules: { 'fencepost/layers': 'error' },
  },
  {
    files: ['eslint.config.js', 'vitest.config.ts'],
    rules: { 'no-restricted-syntax': 'off' },
  },
);
