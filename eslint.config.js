import stylistic from '@stylistic/eslint-plugin';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['node_modules/**', 'data/**', 'coverage/**', '.bench/**', 'web/dist/**', 'web/src/api/schema.d.ts', 'test-results/**'] },
  ...tseslint.configs.strict,
  {
    rules: {
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-non-null-assertion': 'error',
      '@typescript-eslint/consistent-type-imports': 'error',
      'no-restricted-syntax': [
        'error',
        { selector: "MemberExpression[object.name='process'][property.name='env']", message: 'Read configuration through src/config.ts' },
        { selector: 'ExportDefaultDeclaration', message: 'Use named exports' },
      ],
    },
  },
  {
    // Prettier (npm run format) lays the code out at 160 columns; this catches what it leaves long: comments and strings.
    files: ['src/**/*.ts', 'scripts/**/*.ts'],
    ignores: ['**/*.test.ts'],
    plugins: { '@stylistic': stylistic },
    rules: { '@stylistic/max-len': ['error', { code: 160, ignoreUrls: true }] },
  },
  {
    files: ['src/config.ts', 'scripts/**', 'bench/**', 'test/**', '**/*.test.ts', 'eslint.config.js', 'web/vite.config.ts'],
    rules: { 'no-restricted-syntax': 'off' },
  },
);
