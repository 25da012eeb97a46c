// The layering rule (ARCHITECTURE.md): a module under src/<layer> may import only from the layers listed for it.
import path from 'node:path';

/** layer -> the layers it may import (besides itself). */
export const LAYERS = {
  domain: [],
  platform: ['domain'],
  gateways: ['domain', 'platform'],
  db: ['domain', 'platform'],
  delivery: ['domain', 'platform', 'db', 'gateways'],
  services: ['domain', 'platform', 'db', 'delivery'],
  http: ['domain', 'platform', 'services'],
  cli: ['domain', 'platform', 'services', 'app'],
  app: ['domain', 'platform', 'db', 'delivery', 'gateways', 'services', 'http'],
};

/** layer -> layers it may import types from, never values: http maps db rows to API objects (serialize.ts). */
export const TYPE_ONLY = {
  http: ['db'],
};

const SRC = path.resolve('src');

function layerOf(file) {
  const rel = path.relative(SRC, file);
  if (rel.startsWith('..')) return null;
  const top = rel.split(path.sep)[0];
  return top in LAYERS ? top : rel === 'main.ts' ? 'main' : null;
}

export const layersPlugin = {
  rules: {
    imports: {
      meta: { type: 'problem', schema: [], messages: { up: 'src/{{from}} may not import src/{{to}} ({{spec}}): see ARCHITECTURE.md' } },
      create(context) {
        const from = layerOf(context.filename);
        if (!from || from === 'main') return {};
        const check = (node, spec, typeOnly = false) => {
          if (typeof spec !== 'string' || !spec.startsWith('.')) return;
          const to = layerOf(path.resolve(path.dirname(context.filename), spec));
          if (!to || to === from || LAYERS[from].includes(to)) return;
          if (typeOnly && TYPE_ONLY[from]?.includes(to)) return;
          context.report({ node, messageId: 'up', data: { from, to, spec } });
        };
        return {
          ImportDeclaration: (node) =>
            check(
              node,
              node.source.value,
              node.importKind === 'type' || (node.specifiers.length > 0 && node.specifiers.every((s) => s.importKind === 'type')),
            ),
          ExportNamedDeclaration: (node) => node.source && check(node, node.source.value),
          ExportAllDeclaration: (node) => check(node, node.source.value),
          ImportExpression: (node) => node.source.type === 'Literal' && check(node, node.source.value),
        };
      },
    },
  },
};
