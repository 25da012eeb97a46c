// A constructor that takes more than four things takes ONE named object of them (DEVELOPERS.md, ARCHITECTURE.md).
export const MAX_CONSTRUCTOR_PARAMS = 4;

export const constructorsPlugin = {
  rules: {
    'named-deps': {
      meta: {
        type: 'suggestion',
        schema: [],
        messages: {
          tooMany:
            'constructor takes {{count}} parameters: take one named dependencies object instead (at most {{max}}; see ARCHITECTURE.md)',
        },
      },
      create(context) {
        return {
          'MethodDefinition[kind="constructor"]'(node) {
            const count = node.value.params.length;
            if (count > MAX_CONSTRUCTOR_PARAMS)
              context.report({ node: node.key, messageId: 'tooMany', data: { count, max: MAX_CONSTRUCTOR_PARAMS } });
          },
        };
      },
    },
  },
};
