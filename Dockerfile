# syntax=docker/dockerfile:1

# pushd runs its TypeScript directly through tsx (a production dependency): there is no build output.
# Stage 1 installs the full toolchain and typechecks, so an image is only ever built from code that compiles.
FROM node:20-bookworm-slim AS check
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json ./
COPY bin ./bin
COPY src ./src
RUN npx tsc --noEmit -p tsconfig.json && touch /app/.typechecked

# Stage 2: production dependencies only, the sources, a non-root user.
FROM node:20-bookworm-slim
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=3000 \
    DATA_DIR=/app/data
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
# Ties this stage to the check stage (BuildKit skips stages nothing copies from).
COPY --from=check /app/.typechecked ./.typechecked
COPY tsconfig.json ./
COPY bin ./bin
COPY migrations ./migrations
COPY src ./src
# DATA_DIR is only used without DATABASE_URL (embedded PostgreSQL); it must belong to the runtime user.
RUN mkdir -p /app/data && chown node:node /app/data
USER node
EXPOSE 3000
# ROLE=all|api|worker picks what this container runs; see docker-compose.yml.
CMD ["node", "--import", "tsx", "src/main.ts"]
