# syntax=docker/dockerfile:1

# Stage 1: the full toolchain compiles src/ to dist/ (tsc, strict), so an image only holds code that compiles.
FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY migrations ./migrations
COPY console ./console
COPY scripts/build-console.mjs ./scripts/build-console.mjs
RUN npm run build

# Stage 2: production dependencies only, the compiled service with its migrations, a non-root user.
# The server runs as plain JavaScript (a worker at rest needs ~65 MB less memory than under tsx).
FROM node:20-bookworm-slim
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=3000 \
    DATA_DIR=/app/data
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
COPY scripts/node-flags ./scripts/node-flags
COPY bin ./bin
# DATA_DIR is only used without DATABASE_URL (embedded PostgreSQL); it must belong to the runtime user.
RUN mkdir -p /app/data && chown node:node /app/data
USER node
EXPOSE 3000
# ROLE=all|api|worker picks what this container runs; see docker-compose.yml.
# Node flags: scripts/node-flags (shared with npm start and the benchmarks).
CMD ["/bin/sh", "-c", "exec node $(grep -v '^#' scripts/node-flags) dist/src/main.js"]
